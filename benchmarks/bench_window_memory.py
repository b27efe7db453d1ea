"""The k-mer width rule on wide k-mers of many features, for timing whole processes A/B (time
and peak memory): 300 sets of 200 steps of 120 features (random walks, two classes), every
width of ``WINDOW_CANDIDATES`` scored by ``select_window`` as ``NystromFeatures`` scores them.

    cd benchmarks
    farm-bench -n 3 --timeout 300 \\
        --vs "env OMP_NUM_THREADS=1 PYTHONPATH=.. python bench_window_memory.py --unbounded" \\
        -- env OMP_NUM_THREADS=1 PYTHONPATH=.. python bench_window_memory.py

``--unbounded``: every width on ``WINDOW_PER_SET`` k-mers a set whatever their size (the rule
before ``WINDOW_MAX_VALUES``); ``--fit``: the whole ``NystromFeatures(random_state=0).fit``
(the rule, then the map and the anchors on the width taken), with ``--params JSON`` its other
parameters, e.g. ``--params '{"window": 10, "max_samples": 100000}'`` (a fit of the anchors
only, on the k-mers of all 300 sets, against ``max_samples="auto"``). Prints the width taken,
the scores and the process's peak memory.
"""

import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import json  # noqa: E402
import resource  # noqa: E402

import numpy as np  # noqa: E402

import skset._map_selection as ms  # noqa: E402
from skset.nn.nystrom import DEFAULT_EIGENVALUE_FLOOR, DEFAULT_N_COMPONENTS  # noqa: E402

if "--unbounded" in sys.argv:
    ms.WINDOW_MAX_VALUES = 2**62
rng = np.random.default_rng(0)
n_sets, length, n_features = 300, 200, 120
y = np.arange(n_sets) % 2
X = [np.cumsum(rng.normal(size=(length, n_features)), 0) * (1 + 0.5 * c) for c in y]
if "--fit" in sys.argv:
    from skset import NystromFeatures

    params = json.loads(sys.argv[sys.argv.index("--params") + 1]) if "--params" in sys.argv else {}
    ny = NystromFeatures(random_state=0, **params).fit(X, y)
    window, scores = ny.window_, ny.window_scores_
else:  # the rule alone, with NystromFeatures' defaults
    window, dilation, scores = ms.select_window(
        X, y, kmer_coding="level_shape", fixed={}, default=ms.DEFAULT_CHOICE,
        n_components=DEFAULT_N_COMPONENTS, eigenvalue_floor=DEFAULT_EIGENVALUE_FLOOR,
        rng=np.random.RandomState(0), dilate=True)
print("window", window, "scores", ms.format_window_scores(scores or []),
      "peak %.0f MiB" % (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
