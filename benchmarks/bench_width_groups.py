"""The k-mer width chosen by cross-validation that holds out whole wearers, against the width
rule and a plain stratified cross-validation, on WatchMagnitude (``suite_data._watch``: the test
recordings are other wearers' than the training recordings).

For each seed, ``GridSearchCV`` over ``nystrom__window`` (3, 5, 10, 20; ``dilation=1``) of the
default pipeline ``NystromFeatures -> OTKEmbedding -> LogisticRegression``, once with
``GroupKFold`` over the training wearers and once with ``StratifiedKFold(5)``, each refitted on
every training recording and scored on the test wearers' recordings; beside it the default
pipeline (``window="auto"``).

    cd benchmarks
    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python bench_width_groups.py --seeds 0 1 2 \
        --json-rows results/width_groups.jsonl

One line per seed and selection: the width chosen, its cross-validated accuracy, the test
accuracy, seconds.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import GridSearchCV, GroupKFold, StratifiedKFold  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from suite_data import load, watch_groups  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402

WIDTHS = [3, 5, 10, 20]


def pipeline(seed, **nystrom):
    return Pipeline([("nystrom", NystromFeatures(random_state=seed, **nystrom)),
                     ("otk", OTKEmbedding(random_state=seed)),
                     ("clf", LogisticRegression(max_iter=2000))])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument("--json-rows", default=None)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    X, Xt, y, yt = load("WatchMagnitude")
    groups = watch_groups("train")
    out = open(args.json_rows, "a") if args.json_rows else None
    for seed in args.seeds:
        t = time.perf_counter()
        auto = pipeline(seed).fit(X, y)
        rows = [("rule", int(auto.named_steps["nystrom"].window_), None, auto.score(Xt, yt),
                 time.perf_counter() - t)]
        for name, cv in (("group_kfold", GroupKFold(n_splits=len(np.unique(groups)))),
                         ("stratified_5fold", StratifiedKFold(5, shuffle=True, random_state=seed))):
            t = time.perf_counter()
            grid = GridSearchCV(pipeline(seed, dilation=1), {"nystrom__window": WIDTHS}, cv=cv)
            grid.fit(X, y, groups=groups)
            rows.append((name, int(grid.best_params_["nystrom__window"]), float(grid.best_score_),
                         grid.score(Xt, yt), time.perf_counter() - t))
        for name, w, cv_score, test, secs in rows:
            cv_text = "" if cv_score is None else f"{cv_score:.3f}"
            print(f"seed {seed} {name:16s} window {w:2d} cv {cv_text:5s} test {test:.3f} "
                  f"({secs:.0f} s)", flush=True)
            if out:
                out.write(json.dumps(dict(dataset="WatchMagnitude", seed=seed, selection=name,
                                          window=w, cv_score=cv_score, test=float(test),
                                          seconds=secs)) + "\n")
                out.flush()


if __name__ == "__main__":
    main()
