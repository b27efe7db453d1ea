"""``ABCClusterer.predict`` on many small instances: 50,000 instances of 2-8 points of 8
features, after a short fit on 200 instances of 40 points (three clusters), three calls, one
thread; prints the median seconds of a call and a checksum of the labels. Timed as a whole
process against another checkout of skset with the library's ``farm-bench``::

    OMP_NUM_THREADS=1 farm-bench -n 5 --timeout 900 \\
        --vs "sh -c 'PYTHONPATH=<other checkout> exec python benchmarks/bench_abc_predict_many.py'" \\
        -- sh -c 'PYTHONPATH=. exec python benchmarks/bench_abc_predict_many.py'

Results: ``results/abc.md``, "Many small instances".
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import hashlib  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from skset import ABCClusterer  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    rng = np.random.default_rng(0)
    y_tr = [rng.integers(0, 3, 40) for _ in range(200)]
    X_tr = [rng.standard_normal((40, 8)).astype(np.float32) + 3 * c[:, None] for c in y_tr]
    X = [rng.standard_normal((int(n), 8)).astype(np.float32) for n in rng.integers(2, 9, 50_000)]
    model = ABCClusterer(max_steps=30, eval_every=10, early_stopping=False, n_init=2,
                         random_state=0).fit(X_tr, y_tr)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        labels = model.predict(X)
        times.append(time.perf_counter() - start)
    digest = hashlib.sha256(np.concatenate(labels).astype(np.int64).tobytes()).hexdigest()[:16]
    print(f"predict: {np.median(times):.3f} s (median of 3); labels {digest}")


if __name__ == "__main__":
    main()
