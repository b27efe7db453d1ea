"""The hot paths that the engine's input checks touch (the reading of masks in ``skset.nn``, the
finiteness of the real rows in ``skset.ot.sinkhorn``): ``OTKEmbedding.transform`` and a Set
Transformer's ``predict_proba`` on 2,000 sets of 20-200 elements of 16 features, three times
each, one thread. Prints nothing: timed as a whole process, against another checkout of skset
(``PYTHONPATH``), with the library's ``farm-bench``::

    OMP_NUM_THREADS=1 farm-bench -n 5 --timeout 800 \\
        --vs "env PYTHONPATH=<other checkout> python benchmarks/bench_input_checks.py" \\
        -- env PYTHONPATH=. python benchmarks/bench_input_checks.py

Results: ``results/otk_transform.md``, "The engine's input checks".
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from skset import OTKEmbedding, SetTransformerClassifier  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(n), 16)).astype(np.float32) for n in rng.integers(20, 200, 2000)]
    y = np.arange(2000) % 2
    otk = OTKEmbedding(n_supports=10, random_state=0).fit(X[:200])
    st = SetTransformerClassifier(max_iter=1, random_state=0, device="cpu").fit(X[:200], y[:200])
    for _ in range(3):
        otk.transform(X)
        st.predict_proba(X)


if __name__ == "__main__":
    main()
