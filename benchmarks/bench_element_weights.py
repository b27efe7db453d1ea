"""Element masses on many small sets: ``OTKClassifier.predict_proba`` of 50,000 sets of 2-8
elements of 8 features with ``element_weight`` (one random 1-D array of masses per set), three
times, one thread. The masses' checks and normalisation run once per call. Prints the median
seconds of a call; timed as a whole process against another checkout of skset with the
library's ``farm-bench``::

    OMP_NUM_THREADS=1 farm-bench -n 5 --timeout 900 \\
        --vs "sh -c 'PYTHONPATH=<other checkout> exec python benchmarks/bench_element_weights.py'" \\
        -- sh -c 'PYTHONPATH=. exec python benchmarks/bench_element_weights.py'

Results: ``results/otk_transform.md``, "Element masses checked in one pass".
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from skset import OTKClassifier  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")  # one epoch: a ConvergenceWarning
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(n), 8)).astype(np.float32) for n in rng.integers(2, 9, 50_000)]
    W = [rng.random(len(x)) + 0.1 for x in X]
    y = np.arange(len(X)) % 2
    clf = OTKClassifier(n_components=16, n_supports=4, max_iter=1, random_state=0,
                        device="cpu").fit(X[:300], y[:300], element_weight=W[:300])
    times = []
    for _ in range(3):
        start = time.perf_counter()
        clf.predict_proba(X, element_weight=W)
        times.append(time.perf_counter() - start)
    print(f"predict_proba with element_weight: {np.median(times):.3f} s (median of 3)")


if __name__ == "__main__":
    main()
