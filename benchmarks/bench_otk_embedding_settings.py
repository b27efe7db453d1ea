"""The default pipeline with ``OTKEmbedding`` set as ``OTKClassifier``'s start is, one setting at
a time: where the supervised model's start falls short of the pipeline, which setting does it.

``OTKClassifier`` starts from the paper's OTK settings (``epsilon=0.5``, 10 Sinkhorn iterations,
positions in the plan) where ``OTKEmbedding`` has ``epsilon=0.1``, Sinkhorn to a tolerance and
positions in the kernel. Per data set, framing and seed, the default ``NystromFeatures`` is fitted
once and ``OTKEmbedding`` + ``LogisticRegression`` scored with each variant of ``VARIANTS``
(``normalize=False``, the embedding's own normalisation off, as a control):

    cd benchmarks
    python bench_otk_embedding_settings.py --out results/otk_embedding_settings.jsonl \
        --runs ArrowHead:set:0 ...
    python bench_otk_embedding_settings.py --table results/otk_embedding_settings.jsonl

Results: ``results/supervised_otk.md`` ("Why the supervised start sits under the pipeline").
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


import numpy as np  # noqa: E402
from _records import read_rows, runs_main  # noqa: E402
from bench_suite import clf, framing, score  # noqa: E402
from suite_data import load  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402

CLASSIFIER_START = {"epsilon": 0.5, "sinkhorn_iter": 10, "sinkhorn_tol": None,
                    "position_mode": "plan"}
VARIANTS = {"default": {}, "epsilon 0.5": {"epsilon": 0.5},
            "10 iterations": {"sinkhorn_iter": 10, "sinkhorn_tol": None},
            "positions in the plan": {"position_mode": "plan"},
            "the classifier's start": CLASSIFIER_START, "normalize=False": {"normalize": False}}


def run(name, fr, seed):
    X_tr, X_te, y_tr, y_te = load(name)
    nys_p, otk_p = framing(name, 1, fr, {}, {})
    nys = NystromFeatures(random_state=seed, **nys_p)
    F_tr, F_te = nys.fit_transform(X_tr, y_tr), nys.transform(X_te)
    rec = dict(dataset=name, framing=fr, seed=seed)
    for key, params in VARIANTS.items():
        otk = OTKEmbedding(random_state=seed, **{**otk_p, **params})
        Z = otk.fit_transform(F_tr, y_tr)
        rec[key] = score(clf().fit(Z, y_tr), otk.transform(F_te), y_te, name)
    return rec


def table(paths):
    rows = read_rows(paths)
    lines = ["| data set | framing | seeds | " + " | ".join(VARIANTS) + " |",
             "|---|---|---|" + "---:|" * len(VARIANTS)]
    for (name, fr), rs in rows.items():
        cells = " | ".join(f"{100 * np.mean([r[k] for r in rs]):.1f}" for k in VARIANTS)
        lines.append(f"| {name} | {fr} | {len(rs)} | {cells} |")
    return "\n".join(lines)


if __name__ == "__main__":
    runs_main(__doc__, run, table)
