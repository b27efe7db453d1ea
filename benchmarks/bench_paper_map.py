"""The paper's element map against the pipeline's chosen map, both under OTK pooling.

``NystromFeatures`` chooses its map with a mean-pooled proxy and never searches the sphere with
the norm kept (``normalize=True, keep_norm=True``, the map of Mialon et al. and the incumbent of
the supervised OTK models). This script scores, per data set, framing and seed, the default
pipeline (``NystromFeatures`` with its ``"auto"`` choices, then the default ``OTKEmbedding`` and
``LogisticRegression``) against the same pipeline on the paper's map (``standardize=True,
normalize=True, keep_norm=True, bandwidth=0.5``; the k-mer width still chosen by the rule) and
on the two embeddings side by side (their features concatenated): the test score of each, and
the 5-fold cross-validated accuracy of the logistic regression on each embedding of the
training sets (stratified, shuffled with seed 0; the unsupervised map and embedding fitted on
all training sets), to see whether the training sets could tell which map to take.

    cd benchmarks
    python bench_paper_map.py --runs WatchMagnitude:seq:0 ArrowHead:set:0 ... --out results/paper_map.jsonl
    python bench_paper_map.py --table results/paper_map.jsonl

A run is ``data set:framing:seed`` (framings as in ``bench_suite.py``). Results:
``results/suite.md`` ("The paper's map under OTK pooling").
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import time  # noqa: E402

import numpy as np  # noqa: E402
from _records import read_rows, runs_main  # noqa: E402
from bench_suite import KINDS, clf, framing, score  # noqa: E402
from sklearn.model_selection import StratifiedKFold, cross_val_score  # noqa: E402
from suite_data import load  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402

PAPER = {"standardize": True, "normalize": True, "keep_norm": True, "bandwidth": 0.5}


def run(name, fr, seed):
    X_tr, X_te, y_tr, y_te = load(name)
    nys_p, otk_p = framing(name, 1, fr, {}, {})
    rec = dict(dataset=name, framing=fr, seed=seed, metric=KINDS[name]["metric"])
    k = min(5, int(np.unique(y_tr, return_counts=True)[1].min()))
    folds = StratifiedKFold(k, shuffle=True, random_state=0)
    Z = {}
    for key, extra in (("pipeline", {}), ("paper", PAPER)):
        t = time.perf_counter()
        nys = NystromFeatures(random_state=seed, **nys_p, **extra)
        F_tr = nys.fit_transform(X_tr, y_tr)
        otk = OTKEmbedding(random_state=seed, **otk_p)
        Z[key] = (otk.fit_transform(F_tr, y_tr), otk.transform(nys.transform(X_te)))
        rec[key] = score(clf().fit(Z[key][0], y_tr), Z[key][1], y_te, name)
        rec[key + "_cv"] = float(cross_val_score(clf(), Z[key][0], y_tr, cv=folds).mean())
        rec[key + "_window"] = int(getattr(nys, "window_", 1))
        rec[key + "_time_s"] = round(time.perf_counter() - t, 1)
    both = [np.hstack([Z["pipeline"][i], Z["paper"][i]]) for i in (0, 1)]
    rec["both"] = score(clf().fit(both[0], y_tr), both[1], y_te, name)
    return rec


def table(paths):
    """Means over seeds (in %): test score of each map and of both, CV accuracy of each."""
    rows = read_rows(paths)
    lines = ["| data set | framing | seeds | pipeline's map | paper's map | both | CV: pipeline's | "
             "CV: paper's | CV picks the better |", "|---|---|---|---:|---:|---:|---:|---:|---|"]
    for (name, fr), rs in rows.items():
        m = {k: 100 * np.mean([r[k] for r in rs])
             for k in ("pipeline", "paper", "both", "pipeline_cv", "paper_cv")}
        right = sum((r["paper_cv"] > r["pipeline_cv"]) == (r["paper"] > r["pipeline"])
                    for r in rs if r["paper_cv"] != r["pipeline_cv"] and r["paper"] != r["pipeline"])
        decided = sum(r["paper_cv"] != r["pipeline_cv"] and r["paper"] != r["pipeline"] for r in rs)
        label = name + (" (AUC)" if rs[0]["metric"] == "auc" else "")
        lines.append(f"| {label} | {fr} | {len(rs)} | {m['pipeline']:.1f} | {m['paper']:.1f} | "
                     f"{m['both']:.1f} | {m['pipeline_cv']:.1f} | {m['paper_cv']:.1f} | "
                     f"{right} of {decided} |")
    return "\n".join(lines)


if __name__ == "__main__":
    runs_main(__doc__, run, table)
