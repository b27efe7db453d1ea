"""Deep Sets' pooling where a set's size is the signal: sets of 1-20 elements of two U(0, 1)
features, the target the sum of the first feature (the Deep Sets paper's sum of digits, on
numbers) or the number of elements; ``DeepSetsRegressor`` with each ``pooling``, every other
parameter at its default (``window=1``: unordered sets), 1,000 training and 500 test sets.
Prints the test RMSE of each, and the training mean's.

    cd benchmarks
    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python bench_ds_pooling_counts.py --seeds 0 1 2
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

from skset import DeepSetsRegressor  # noqa: E402

POOLINGS = ["sum", "scaled_mean", "sized_mean", "mean"]


def sets(rng, n):
    X = [rng.uniform(0, 1, size=(int(k), 2)) for k in rng.integers(1, 21, size=n)]
    return X, {"sum": np.array([x[:, 0].sum() for x in X]),
               "count": np.array([len(x) for x in X], dtype=float)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--poolings", nargs="+", default=POOLINGS)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    rows = {}
    for seed in args.seeds:
        rng = np.random.default_rng(seed)
        Xtr, ytr = sets(rng, 1000)
        Xte, yte = sets(rng, 500)
        for target in ("sum", "count"):
            mean = np.sqrt(np.mean((yte[target] - ytr[target].mean()) ** 2))
            rows.setdefault((target, "training mean"), []).append(mean)
            for pooling in args.poolings:
                m = DeepSetsRegressor(pooling=pooling, window=1, random_state=seed)
                pred = m.fit(Xtr, ytr[target]).predict(Xte)
                rmse = float(np.sqrt(np.mean((pred - yte[target]) ** 2)))
                rows.setdefault((target, pooling), []).append(rmse)
                print(f"seed {seed} {target:5s} {pooling:11s} RMSE {rmse:.3f}", flush=True)
    print("\n| target | model | test RMSE, mean of seeds " + " ".join(map(str, args.seeds))
          + " | each seed |\n|---|---|---:|---|")
    for (target, model), v in rows.items():
        print(f"| {target} | {model} | {np.mean(v):.3f} | {', '.join(f'{x:.3f}' for x in v)} |")


if __name__ == "__main__":
    main()
