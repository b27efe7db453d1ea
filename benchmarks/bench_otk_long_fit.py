"""A short ``OTKClassifier`` fit on long series, timed as a whole process (``farm-bench``).

60 random walks of 800-2,000 steps (one feature), 3 classes, read as 10-mers (``window=10``,
``dilation=1``), 10 epochs whatever the loss (``tol=0``), seed 0; prints the epochs run and the
training accuracy. Used to time changes of the training step and the allocator's settings side
by side, for instance (one thread, from two checkouts, or with and without the variables)::

    OMP_NUM_THREADS=1 farm-bench -n 5 --timeout 580 \\
        --vs "sh -c 'cd <other checkout> && PYTHONPATH=. exec python benchmarks/bench_otk_long_fit.py'" \\
        -- sh -c 'PYTHONPATH=. exec python benchmarks/bench_otk_long_fit.py'

Results: ``results/supervised_otk.md`` ("Training on long series: time").
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import warnings  # noqa: E402

import numpy as np  # noqa: E402

from skset import OTKClassifier  # noqa: E402


def main():
    warnings.filterwarnings("ignore")
    rng = np.random.default_rng(0)
    X = [np.cumsum(rng.normal(size=(int(n), 1)), 0).astype(np.float32)
         for n in rng.integers(800, 2000, 60)]
    y = np.arange(60) % 3
    model = OTKClassifier(random_state=0, max_iter=10, window=10, dilation=1, tol=0).fit(X, y)
    print(model.n_iter_, model.score(X, y))


if __name__ == "__main__":
    main()
