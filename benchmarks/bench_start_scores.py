"""What ``OTKClassifier``'s start rule sees, without training: for each suite row and seed, the
out-of-fold hits of a logistic head on the paper's start and on the pipeline's start (the two
initial embeddings of ``skset/neural_network/_otk_start.py``), their means and the paired t
statistic of pipeline minus paper. The fit stops once both starts are scored (no epoch runs).

    cd benchmarks
    python bench_start_scores.py --runs ArrowHead:set:0 ArrowHead:seq:0 ... \\
        --out results/otk_start_scores.jsonl
    python bench_start_scores.py --table results/otk_start_scores.jsonl

A run is ``data set:framing:seed`` (framings as in ``bench_suite.py``'s ``OTKClassifier``
column: ``set``, the elements as given, the classifier chooses its k-mers; ``seq``, ``window``
given as ``KINDS[name]["window"]``). Runs where both starts choose the same map (the rule does
not apply) are recorded with ``"scored": false``.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import time  # noqa: E402

from _records import read_rows, runs_main  # noqa: E402
from suite_data import KINDS, load  # noqa: E402

from skset import OTKClassifier  # noqa: E402
from skset._stats import paired_t  # noqa: E402
from skset.neural_network import _otk_start  # noqa: E402


class _Scored(Exception):
    pass


def _score_starts(est, paper, pipeline, y, sample_weight, masses):
    """Both starts' out-of-fold hits, as ``choose_start`` computes them; then stop the fit."""
    hits = _otk_start.start_hits(est, paper, pipeline, y, sample_weight, masses)
    raise _Scored(hits, [_otk_start.map_choice(p[0]) for p in (paper, pipeline)])


def run(name, framing, seed):
    X_tr, _, y_tr, _ = load(name)
    width = {"window": KINDS[name]["window"]} if framing == "seq" else {}
    t = time.perf_counter()
    rec = dict(dataset=name, framing=framing, seed=seed, n_train=len(X_tr))
    _otk_start.choose_start = _score_starts
    try:
        OTKClassifier(random_state=seed, **width).fit(X_tr, y_tr)
    except _Scored as s:
        (paper, pipe), maps = s.args
        rec.update(scored=True, paper=float(paper.mean()), pipeline=float(pipe.mean()),
                   t=float(paired_t(pipe, paper)), maps=[list(map(str, m)) for m in maps])
    else:
        rec["scored"] = False
    rec["time_s"] = round(time.perf_counter() - t, 1)
    return rec


def table(paths):
    """One line per data set and framing: each seed's ``paper's / pipeline's (t)``."""
    lines = ["| data set | framing | training sets | each seed: paper's / pipeline's start (t) |",
             "|---|---|---:|---|"]
    for (name, framing), recs in read_rows(paths).items():
        cells = [f"{r['paper']:.2f} / {r['pipeline']:.2f} ({r['t']:+.1f})" if r["scored"]
                 else "same map" for r in sorted(recs, key=lambda r: r["seed"])]
        lines.append(f"| {name} | {framing} | {recs[0]['n_train']} | {'; '.join(cells)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    runs_main(__doc__, run, table)
