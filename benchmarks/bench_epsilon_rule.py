"""Can the training data tell which epsilon a suite row wants? (issue 23, the grid bar)

For each data set, framing and seed: the default Nystrom features (as the suite's ``otk`` row
computes them), one ``OTKEmbedding`` per candidate epsilon (the same references: the k-means of
the supports does not depend on epsilon), and side by side

* the proxies a rule in ``fit`` could read: the leave-one-out squared error of a ridge model on
  the training embeddings (``skset._map_selection.loo_ridge_errors``, the element map's rule), and
  the paired t statistic of each candidate against epsilon 0.1 (positive: the candidate's errors
  are lower), with the embedding's columns standardised (``std``, as the map's rule does) or as
  they are (``raw``); and the per-set log-loss of the suite's classifier itself under 5-fold
  stratified cross-validation on the training sets (``lr``);
* the test score of ``LogisticRegression`` (the suite's classifier, C = 1) on each embedding.

    OMP_NUM_THREADS=1 python benchmarks/bench_epsilon_rule.py --datasets PickupGestureWiimoteZ \
        WatchMagnitude ArrowHead OSULeaf --out benchmarks/results/epsilon_rule.jsonl
    python benchmarks/bench_epsilon_rule.py --table benchmarks/results/epsilon_rule.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _records import emit  # noqa: E402
from bench_suite import Framing, clf, score  # noqa: E402
from sklearn.model_selection import StratifiedKFold, cross_val_predict  # noqa: E402

from skset import OTKEmbedding  # noqa: E402
from skset._map_selection import loo_ridge_errors  # noqa: E402

EPSILONS = (0.1, 0.5)


def targets(y):
    """One-hot targets of the leave-one-out ridge (one column for two classes)."""
    classes, codes = np.unique(y, return_inverse=True)
    onehot = np.eye(len(classes))[codes]
    return onehot[:, 1:] if len(classes) == 2 else onehot


def cv_log_loss(Z, y, seed, folds=5):
    """Per-set log-loss of the suite's classifier under stratified k-fold cross-validation."""
    folds = min(folds, int(np.unique(y, return_counts=True)[1].min()))
    cv = StratifiedKFold(folds, shuffle=True, random_state=seed)
    proba = cross_val_predict(clf(), Z, y, cv=cv, method="predict_proba")
    codes = np.unique(y, return_inverse=True)[1]
    return -np.log(np.maximum(proba[np.arange(len(y)), codes], 1e-12))


def paired_t(errors, incumbent):
    diff = incumbent - errors
    sd = diff.std(ddof=1)
    return float(diff.mean() / (sd / np.sqrt(len(diff)))) if sd > 0 else 0.0


def table(path):
    """One line per data set, framing and seed: test score at epsilon 0.1 and 0.5, and each
    proxy's paired t of 0.5 against 0.1 (a rule would move to 0.5 above 2)."""
    print("| data set | framing | seed | test, eps 0.1 | test, eps 0.5 | t ridge (std) | t ridge (raw) "
          "| t CV log-loss |")
    print("|---|---|---|---|---|---|---|---|")
    for line in open(path):
        r = json.loads(line)
        a, b = r["eps0.1"], r["eps0.5"]
        print(f"| {r['dataset']} | {r['framing']} | {r['seed']} | {a['test']:.1f} | {b['test']:.1f} "
              f"| {b['t_std']:+.2f} | {b['t_raw']:+.2f} | {b['t_lr']:+.2f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+")
    ap.add_argument("--table", default=None, metavar="JSONL", help="print the table of a run")
    ap.add_argument("--framings", nargs="+", default=["set", "seq"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.table:
        return table(args.table)
    torch.set_num_threads(1)
    for name in args.datasets:
        for kind in args.framings:
            fr = Framing(name, kind, {}, {}, None)
            if kind == "seq" and "window" not in fr.nys_p:
                continue
            for seed in args.seeds:
                F_tr, F_te, _, _ = fr.features(seed)
                Y = targets(fr.y_tr)
                rec = {"dataset": name, "framing": kind, "seed": seed, "n_train": len(F_tr)}
                base = None
                for eps in EPSILONS:
                    otk = OTKEmbedding(random_state=seed, epsilon=eps, **fr.otk_p).fit(F_tr)
                    Z_tr, Z_te = otk.transform(F_tr), otk.transform(F_te)
                    sd = Z_tr.std(0)
                    errs = {"std": loo_ridge_errors(Z_tr / np.where(sd > 1e-12, sd, 1.0), Y),
                            "raw": loo_ridge_errors(Z_tr, Y), "lr": cv_log_loss(Z_tr, fr.y_tr, seed)}
                    if base is None:
                        base = errs
                    test = score(clf().fit(Z_tr, fr.y_tr), Z_te, fr.y_te, name)
                    rec[f"eps{eps:g}"] = {"test": 100 * test, **{
                        f"t_{k}": paired_t(e, base[k]) for k, e in errs.items()}}
                emit(rec, args.out)


if __name__ == "__main__":
    main()
