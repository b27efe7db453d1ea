"""Deep Sets / Set Transformer with their defaults against other training settings, on rows of
the real-data suite (``suite_data.py``): one line per data set, framing and setting, with the test
score, the epochs run (``n_iter_``) and the fit time.

    OMP_NUM_THREADS=1 python benchmarks/bench_trained_small.py --model ds --seed 0 \
        --rows ItalyPowerDemand:1 ArrowHead:10 \
        --variants '{"default": {}, "auto": {"batch_size": "auto", "n_iter_no_change": "auto"}}'

A row is ``name:window`` (window 1: the ``set`` framing, each series the set of its time points;
> 1: the ``seq`` framing's k-mers, as ``bench_suite.py`` makes them). Scores: accuracy, or ROC AUC
for the MNIST bags (as in ``bench_suite.py``). Results: ``results/trained_vs_pooling.md``.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from bench_suite import score  # noqa: E402
from suite_data import load  # noqa: E402

from skset import DeepSetsClassifier, SetTransformerClassifier  # noqa: E402
from skset._sets import kmer_windows  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=("ds", "st"), default="ds")
    ap.add_argument("--rows", nargs="+", required=True, help="name:window, e.g. ArrowHead:10")
    ap.add_argument("--variants", default='{"default": {}}',
                    help="JSON {label: estimator parameters}")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    est = DeepSetsClassifier if args.model == "ds" else SetTransformerClassifier
    variants = json.loads(args.variants)
    warnings.filterwarnings("ignore", message=".*did not improve.*")
    warnings.filterwarnings("ignore", message=".*Maximum iterations.*")
    for row in args.rows:
        name, w = row.split(":")
        w = int(w)
        X_tr, X_te, y_tr, y_te = load(name)
        if w > 1:
            X_tr, X_te = kmer_windows(X_tr, w), kmer_windows(X_te, w)
        for label, params in variants.items():
            t = time.perf_counter()
            model = est(random_state=args.seed, **params).fit(X_tr, y_tr)
            seconds = time.perf_counter() - t
            value = 100 * score(model, X_te, y_te, name)
            classes = len(np.unique(model.predict(X_te)))
            print(f"{name} w={w} n_train={len(X_tr)} seed={args.seed} {label}: "
                  f"{value:.1f} n_iter={model.n_iter_} predicted_classes={classes} "
                  f"{seconds:.0f}s", flush=True)


if __name__ == "__main__":
    main()
