"""Several k-mer widths at once: does the union of the k-mers of two or three widths beat the
best single width on the suite's long series?

Each width ``w`` of a combination gets its own ``NystromFeatures(n_components=128 // len(combo),
window=w)`` (its map chosen from the labels as usual); a set becomes the union of its k-mers of
every width, each width's rows in their own block of features (zeros elsewhere: the kernel
between k-mers of different widths is 0, so the union's pooled features are the widths' pooled
features side by side, weighted by their counts), with as many features in all as one map of
the default 128. Then the default ``OTKEmbedding`` and the suite's classifier, as the ``otk`` row
of ``bench_suite.py``.

    cd benchmarks
    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python bench_multiscale_kmers.py \\
        --datasets WatchMagnitude OSULeaf ArrowHead ACSF1 --json-rows results/multiscale_kmers.jsonl
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from bench_suite import RowLog, clf, score  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from suite_data import DATASETS, load  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402

COMBOS = ((5,), (10,), (20,), (5, 20), (10, 20), (5, 10, 20))


def direct_sum(parts):
    """One set per set of ``parts[0]``: the rows of every part, each part in its own block."""
    dims = [p[0].shape[1] for p in parts]
    out = []
    for i in range(len(parts[0])):
        rows, offset = [], 0
        for part, d in zip(parts, dims):
            block = np.zeros((len(part[i]), sum(dims)), dtype=part[i].dtype)
            block[:, offset:offset + d] = part[i]
            rows.append(block)
            offset += d
        out.append(np.vstack(rows))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="*", default=["WatchMagnitude", "OSULeaf", "ArrowHead",
                                                      "ACSF1"], choices=DATASETS)
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument("--json-rows", default=None, metavar="PATH")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    log = RowLog(args.json_rows)
    for name in args.datasets:
        X_tr, X_te, y_tr, y_te = load(name)
        for seed in args.seeds:
            cache = {}

            def features(w, m, seed=seed, cache=cache, X_tr=X_tr, X_te=X_te, y_tr=y_tr):
                if (w, m) not in cache:
                    nys = NystromFeatures(m, window=w, random_state=seed)
                    cache[w, m] = (list(nys.fit_transform(X_tr, y_tr)), list(nys.transform(X_te)))
                return cache[w, m]

            row = {"dataset": name, "seed": seed, "accuracy": {}}
            for combo in COMBOS:
                m = 128 // len(combo)
                parts = [features(w, m) for w in combo]
                A = direct_sum([p[0] for p in parts])
                B = direct_sum([p[1] for p in parts])
                pipe = Pipeline([("otk", OTKEmbedding(random_state=seed)), ("clf", clf())])
                row["accuracy"]["+".join(map(str, combo))] = score(pipe.fit(A, y_tr), B, y_te,
                                                                   name)
            print(json.dumps(row), flush=True)
            log.write(**row)


if __name__ == "__main__":
    main()
