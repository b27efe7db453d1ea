"""The small case of issue 33: OTKClassifier's fit time with 300 classes against 10.

900 sets of 5-30 elements x 8 features (each class's sets around one random prototype; the
first ``n_classes`` sets cover every class, the rest are drawn at random: 1-9 sets per class,
3 on average, at 300 classes), ``max_iter=3``, the alternating solver. Run it against two
source trees to compare them (the fit time is printed with the number of classes):

    PYTHONPATH=$PWD OMP_WAIT_POLICY=PASSIVE nice -n 10 python benchmarks/bench_many_classes_small.py 300
    PYTHONPATH=$PWD OMP_WAIT_POLICY=PASSIVE nice -n 10 python benchmarks/bench_many_classes_small.py 10
"""

import os
import sys
import time
import warnings

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

from skset.neural_network import OTKClassifier  # noqa: E402

warnings.filterwarnings("ignore")


def main(n_classes: int, solver: str = "alternating"):
    rng = np.random.default_rng(0)
    n = 900
    y = np.concatenate([np.arange(n_classes), rng.integers(0, n_classes, n - n_classes)])
    protos = rng.normal(size=(n_classes, 8))
    X = [protos[c] + rng.normal(size=(rng.integers(5, 31), 8)) for c in y]
    clf = OTKClassifier(max_iter=3, random_state=0, device="cpu", solver=solver)
    t = time.perf_counter()
    clf.fit(X, y)
    print(n_classes, solver, "fit", time.perf_counter() - t, "train acc", clf.score(X, y))


if __name__ == "__main__":
    main(int(sys.argv[1]), *sys.argv[2:3])
