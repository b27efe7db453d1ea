"""``OTKClassifier`` with its defaults against its own start, on the same instances: the
untrained model (the initial embedding, k-means references on the element map the classifier
chooses, and the linear head fitted on it in closed form before any epoch) and the trained one,
from one fit.

    cd benchmarks
    python bench_otk_start.py --runs ArrowHead:set:0 ArrowHead:seq:0 ... --out results/otk_start.jsonl
    python bench_otk_start.py --table results/otk_start.jsonl

``--params '{"alpha": 0.01}'``: other parameters of the classifier (recorded in each line);
``"alpha": "1/n"`` gives each data set the penalty of scikit-learn's ``LogisticRegression()``
(``C=1``: one over its number of training sets).

A run is ``data set:framing:seed`` (framings as in ``bench_suite.py``: ``set``, the elements as
given; ``seq``, k-mers of ``KINDS[name]["window"]``). Scores are test accuracy (also on the MNIST
bags, where the suite reports ROC AUC). Results: ``results/otk_start.md``.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import copy  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from _records import emit  # noqa: E402
from suite_data import KINDS, load  # noqa: E402

from skset import OTKClassifier  # noqa: E402
from skset._sets import kmer_windows  # noqa: E402


class _KeepStart(OTKClassifier):
    """An ``OTKClassifier`` that keeps a copy of its module as initialised (``start_module``)."""

    def _init_module(self, *args, **kwargs):
        module = super()._init_module(*args, **kwargs)
        self.start_module = copy.deepcopy(module)
        return module


def run(name, framing, seed, params=None):
    X_tr, X_te, y_tr, y_te = load(name)
    if framing == "seq":
        w = KINDS[name]["window"]
        X_tr, X_te = kmer_windows(X_tr, w), kmer_windows(X_te, w)
    params = dict(params or {})
    if params.get("alpha") == "1/n":  # scikit-learn's C=1 for this data set's training sets
        params["alpha"] = 1.0 / len(X_tr)
    t = time.perf_counter()
    m = _KeepStart(random_state=seed, **params).fit(X_tr, y_tr)
    elapsed = time.perf_counter() - t
    trained, train_trained = m.score(X_te, y_te), m.score(X_tr, y_tr)
    m.module_ = m.start_module
    return dict(dataset=name, framing=framing, seed=seed, params=params, trained=trained,
                start=m.score(X_te, y_te), train_trained=train_trained,
                train_start=m.score(X_tr, y_tr), window=int(m.window_),
                dilation=int(m.dilation_), n_iter=int(m.n_iter_), time_s=round(elapsed, 1))


def table(paths):
    """Mean test accuracy (%) of the start and the trained model per row, the seeds' pairs in
    brackets, and the count of seeds where training lowered / raised the score."""
    rows = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                rows.setdefault((r["dataset"], r["framing"]), {})[r["seed"]] = r
    lines = ["| data set | framing | seeds | start | trained | change | each seed (start -> trained) |",
             "|---|---|---|---:|---:|---:|---|"]
    down = up = 0
    for (name, fr), seeds in rows.items():
        st = np.array([100 * seeds[s]["start"] for s in sorted(seeds)])
        tr = np.array([100 * seeds[s]["trained"] for s in sorted(seeds)])
        down += int((tr < st - 1e-9).sum())
        up += int((tr > st + 1e-9).sum())
        each = ", ".join(f"{a:.1f} -> {b:.1f}" for a, b in zip(st, tr))
        lines.append(f"| {name} | {fr} | {','.join(map(str, sorted(seeds)))} | {st.mean():.1f} | "
                     f"{tr.mean():.1f} | {tr.mean() - st.mean():+.1f} | {each} |")
    lines += ["", f"Fits where training raised the test score: {up}; lowered it: {down}."]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", nargs="*", default=[], metavar="NAME:FRAMING:SEED")
    ap.add_argument("--params", default="{}", help="JSON OTKClassifier parameters")
    ap.add_argument("--out", help="JSON lines appended here")
    ap.add_argument("--table", nargs="+", metavar="JSONL")
    args = ap.parse_args()
    if args.table:
        print(table(args.table))
        return
    warnings.filterwarnings("ignore")
    for spec in args.runs:
        name, framing, seed = spec.split(":")
        emit(run(name, framing, int(seed), json.loads(args.params)), args.out)


if __name__ == "__main__":
    main()
