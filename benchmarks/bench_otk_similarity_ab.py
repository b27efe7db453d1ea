"""OTKEmbedding: fit on 64 sets, then transform 512 sets of 100 x 64 thirty times (one process;
timed whole, A/B between two checkouts with farm-bench).

    farm-bench -n 5 --vs "env OMP_NUM_THREADS=1 PYTHONPATH=<old> python bench_otk_similarity_ab.py" \\
        -- env OMP_NUM_THREADS=1 PYTHONPATH=<new> python bench_otk_similarity_ab.py
"""
import os

os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
import numpy as np

from skset import OTKEmbedding

rng = np.random.default_rng(0)
X = [rng.random(size=(100, 64)).astype(np.float32) for _ in range(512)]
e = OTKEmbedding(n_supports=16, random_state=0).fit(X[:64])
for _ in range(30):
    e.transform(X)
