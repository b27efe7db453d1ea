"""The Set Transformer paper's set tasks (Lee et al., 2019, Section 5.1-5.2) at the estimators'
defaults: Set Transformer, ST++, Deep Sets, DS++ side by side with the paper's figures.

``--task maxreg``: max regression, sets of 1-10 reals from U(0, 100), the target is the maximum;
test mean absolute error (the paper trains on the MAE, the estimators on the MSE of standardised
targets). Paper (Table 1): SAB+PMA 0.2085, rFF + pooling mean 2.133, sum 1.902, max 0.1355.

``--task counting``: unique counting, sets of 6-10 images of scikit-learn's 8x8 digits
(:func:`skset.datasets.make_unique_count`, training and test images disjoint), the target is the
number of distinct digits (1-10), a 10-class problem; test accuracy. Paper (Table 2, Omniglot,
sets of 6-10 characters out of 1,623): SAB+PMA 0.6037, SAB+pooling 0.5659, rFF+pooling 0.4382.
Chance (the most frequent count) is 0.129.

Every model runs at its defaults except ``max_iter`` and ``random_state`` (and the listed
architecture switches: ST++/DS++ are ``norm="set", residual="clean"``); the default stopping rule
(training loss, ``n_iter_no_change=10``) stays on.

    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python benchmarks/bench_st_tasks.py --task counting
    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python benchmarks/bench_st_tasks.py --task maxreg
    ... --models ST ST-xavier --n-train 2000 --max-iter 10 --seeds 0 1   # a quick look
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import warnings

import numpy as np
import torch
from _input_scaling import MODES, install

from skset import (
    DeepSetsClassifier,
    DeepSetsRegressor,
    SetTransformerClassifier,
    SetTransformerRegressor,
)
from skset.datasets import make_max_regression, make_unique_count

PAPER = {
    "counting": {"ST": "0.6037 (SAB+PMA)", "DS": "0.4382 (rFF+pooling)"},
    "maxreg": {"ST": "0.2085 (SAB+PMA)", "DS": "1.902 (rFF+sum)", "DS-max": "0.1355 (rFF+max)",
               "DS-mean": "2.133 (rFF+mean)"},
}
PP = dict(norm="set", residual="clean")
MODELS = {
    "ST": {},
    "ST++": PP,
    "ST-sab-decoder": dict(decoder="sab"),
    "ST-SAB": dict(n_inducing=None),
    "ST-normal-points": dict(point_init="normal"),
    "ST-raw": dict(standardize=False),
    "DS-raw": dict(standardize=False),
    "DS": {},
    "DS++": PP,
    "DS-max": dict(pooling="max"),
    "DS-mean": dict(pooling="mean"),
    "DS-sized-mean": dict(pooling="sized_mean"),
    # the small grid of the "tuned" rows: width and learning rate around the defaults
    "ST-h128": dict(hidden_size=128),
    "ST-lr3e-4": dict(learning_rate_init=3e-4),
    "DS-h128": dict(hidden_size=128),
    "DS-lr3e-4": dict(learning_rate_init=3e-4),
}


def data(task, n_train, n_test, seed):
    if task == "counting":
        X, y = make_unique_count(n_train, random_state=seed)
        Xt, yt = make_unique_count(n_test, subset="test", random_state=seed + 1000)
    else:
        X, y = make_max_regression(n_train, set_size=(1, 10), low=0.0, high=100.0,
                                   random_state=seed)
        Xt, yt = make_max_regression(n_test, set_size=(1, 10), low=0.0, high=100.0,
                                     random_state=seed + 1000)
    return X, y, Xt, yt


def make(task, name, max_iter, seed):
    st = name.startswith("ST")
    cls = {("counting", True): SetTransformerClassifier, ("counting", False): DeepSetsClassifier,
           ("maxreg", True): SetTransformerRegressor, ("maxreg", False): DeepSetsRegressor}
    return cls[task, st](max_iter=max_iter, random_state=seed, **MODELS[name])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", choices=["counting", "maxreg"], required=True)
    ap.add_argument("--models", nargs="+", default=["ST", "ST++", "DS", "DS++"],
                    choices=list(MODELS))
    ap.add_argument("--n-train", type=int, default=None,
                    help="training sets (default: counting 6000, maxreg 10000)")
    ap.add_argument("--n-test", type=int, default=2000)
    ap.add_argument("--max-iter", type=int, default=None,
                    help="epochs (default: counting 30, maxreg 40)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--json", default=None, help="append the rows to this JSON-lines file")
    ap.add_argument("--scaling", choices=MODES, default=None,
                    help="another input scaling for the networks (benchmarks/_input_scaling.py)")
    args = ap.parse_args()
    install(args.scaling)
    torch.set_num_threads(1)
    n_train = args.n_train or {"counting": 6000, "maxreg": 10000}[args.task]
    max_iter = args.max_iter or {"counting": 30, "maxreg": 40}[args.task]
    metric = "accuracy" if args.task == "counting" else "MAE"
    print(f"# {args.task}: {n_train} training / {args.n_test} test sets, max_iter={max_iter}, "
          f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"{time.strftime('%Y-%m-%d')}")
    print(f"| model | seed | test {metric} | paper | train loss first / min / last | epochs | "
          "fit s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for seed in args.seeds:
        X, y, Xt, yt = data(args.task, n_train, args.n_test, seed)
        for name in args.models:
            est = make(args.task, name, max_iter, seed)
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(X, y)
            fit_s = time.perf_counter() - t0
            if args.task == "counting":
                score = float(np.mean(est.predict(Xt) == yt))
            else:
                score = float(np.mean(np.abs(est.predict(Xt) - yt)))
            lc = est.loss_curve_
            print(f"| {name} | {seed} | {score:.4f} | {PAPER[args.task].get(name, '-')} | "
                  f"{lc[0]:.3f} / {min(lc):.3f} / {lc[-1]:.3f} | {est.n_iter_} | {fit_s:.0f} |",
                  flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(dict(task=args.task, model=name, seed=seed, score=score,
                                            metric=metric, n_train=n_train, max_iter=max_iter,
                                            n_iter=est.n_iter_, fit_s=fit_s,
                                            loss_curve=lc)) + "\n")


if __name__ == "__main__":
    main()
