"""``estimate_n_clusters`` on many small affinity matrices: 50,000 symmetric random matrices of
2-8 points (a list), three calls, one thread; prints the median seconds of a call and the sum
of the counts. Timed as a whole process against another checkout of skset with the library's
``farm-bench``::

    OMP_NUM_THREADS=1 farm-bench -n 5 --timeout 900 \\
        --vs "sh -c 'PYTHONPATH=<other checkout> exec python benchmarks/bench_eigengap_many.py'" \\
        -- sh -c 'PYTHONPATH=. exec python benchmarks/bench_eigengap_many.py'

Results: ``results/abc.md``, "Many small instances".
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from skset.cluster import estimate_n_clusters  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    mats = []
    for n in rng.integers(2, 9, 50_000):
        a = rng.random((n, n))
        mats.append(a + a.T)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        k = estimate_n_clusters(mats)
        times.append(time.perf_counter() - start)
    print(f"estimate_n_clusters: {np.median(times):.3f} s (median of 3); counts sum {int(k.sum())}")


if __name__ == "__main__":
    main()
