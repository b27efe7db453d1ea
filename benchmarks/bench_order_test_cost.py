"""One step of a set network's fit on a suite data set, for timing whole processes A/B (the
order test's cost: run under a checkout with it and one without, e.g. d4c30b4):

    cd benchmarks
    farm-bench -n 5 --timeout 800 \
        --vs "env PYTHONPATH=<checkout of d4c30b4> python bench_order_test_cost.py rule GeneFamilies" \
        -- env PYTHONPATH=.. python bench_order_test_cost.py rule GeneFamilies

``rule``: the k-mers a Set Transformer of ``random_state=0`` chooses (``window="auto"``);
``fit``: a whole ``DeepSetsClassifier(window="auto", random_state=0)`` fit.
"""

import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
from suite_data import load  # noqa: E402

from skset import DeepSetsClassifier, SetTransformerClassifier  # noqa: E402
from skset.neural_network._network_kmers import choose_kmers  # noqa: E402

what, name = sys.argv[1], sys.argv[2]
X, _, y, _ = load(name)
if what == "fit":
    m = DeepSetsClassifier(window="auto", random_state=0).fit(X, y)
    print(m.window_, m.n_iter_)
else:
    est = SetTransformerClassifier(window="auto", random_state=0)
    seed, _ = est._start_fit(False)
    print(choose_kmers(est, [np.asarray(x, np.float32) for x in X], np.asarray(y), seed))
