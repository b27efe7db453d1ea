"""What a rule choosing ``OTKClassifier``'s ``epsilon`` from its start would see, without training:
for each suite row and seed, the start the classifier keeps (its element map and k-mers chosen as
in a default fit), embedded at the default ``epsilon=0.5`` and at the pipeline's ``0.1`` (the
same references: k-means does not read epsilon; the positions chosen again at each), and the
out-of-fold hits of a logistic head on each, as ``choose_start`` scores two starts
(``skset/neural_network/_otk_start.py``: ``START_FOLDS`` stratified folds, the classifier's
``alpha``); their means and the paired t statistic of 0.1 minus 0.5. The fit stops once both are
scored (no epoch runs).

    cd benchmarks
    python bench_epsilon_scores.py --runs DigitPoints:set:0 ArrowHead:seq:0 ... \\
        --out results/otk_epsilon_scores.jsonl
    python bench_epsilon_scores.py --table results/otk_epsilon_scores.jsonl

A run is ``data set:framing:seed`` (framings as in ``bench_suite.py``'s ``OTKClassifier``
column: ``set``, the elements as given, the classifier chooses its k-mers; ``seq``, ``window``
given as ``KINDS[name]["window"]``).
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import time  # noqa: E402

import numpy as np  # noqa: E402
from _records import read_rows, runs_main  # noqa: E402
from sklearn.base import clone  # noqa: E402
from sklearn.model_selection import StratifiedKFold  # noqa: E402
from suite_data import KINDS, load  # noqa: E402

from skset import OTKClassifier, OTKEmbedding  # noqa: E402
from skset._stats import paired_t  # noqa: E402
from skset._weighting import kmer_weights  # noqa: E402
from skset.neural_network import _otk_start  # noqa: E402

EPSILONS = (0.5, 0.1)


class _Scored(Exception):
    pass


def run(name, framing, seed):
    X_tr, _, y_tr, _ = load(name)
    width = {"window": KINDS[name]["window"]} if framing == "seq" else {}
    t = time.perf_counter()
    est = OTKClassifier(random_state=seed, epsilon=0.5, **width)  # its start at 0.5: scored below
    built = []  # every (nystrom, window, feats, embedding) the fit builds
    initial_embedding = OTKClassifier._initial_embedding
    to_module = OTKEmbedding.to_module

    def record(self, mapped, sets, seeds, sample_weight, masses, y, **kw):
        parts = initial_embedding(self, mapped, sets, seeds, sample_weight, masses, y, **kw)
        built.append((parts, sample_weight, masses, y))
        return parts

    def stop(self):  # the classifier turns the start it kept into its layer: score it here
        kept = next(b for b in built if b[0][3] is self)
        # read before the fit's error puts the classifier's attributes back
        raise _Scored(kept, getattr(est, "start_scores_", {}).get("chosen", "paper"))

    OTKClassifier._initial_embedding, OTKEmbedding.to_module = record, stop
    try:
        est.fit(X_tr, y_tr)
    except _Scored as s:
        ((nystrom, window, feats, embedding), sw, masses, y), chosen = s.args
    finally:
        OTKClassifier._initial_embedding, OTKEmbedding.to_module = initial_embedding, to_module
    y = np.asarray(y)
    k = min(_otk_start.START_FOLDS, int(np.unique(y, return_counts=True)[1].min()))
    folds = list(StratifiedKFold(k, shuffle=True, random_state=embedding.random_state)
                 .split(np.zeros(len(y)), y))
    ew = None if masses is None else kmer_weights(masses, window,
                                                  1 if nystrom is None else nystrom.dilation_)
    hits, sigmas = [], []
    for eps in EPSILONS:
        emb = embedding if eps == embedding.epsilon else clone(embedding).set_params(
            epsilon=eps).fit(feats, y if embedding.position_sigma == "auto" else None,
                             sample_weight=sw, element_weight=ew)
        hits.append(_otk_start.fold_hits((nystrom, window, feats, emb), y, folds,
                                         _otk_start.head_alpha(est.alpha, len(y), sw), sw,
                                         masses))
        sigmas.append(emb.position_sigma_)
    return dict(dataset=name, framing=framing, seed=seed, n_train=len(X_tr),
                start=chosen,
                map=list(map(str, _otk_start.map_choice(nystrom) or [])),
                scores={str(e): float(h.mean()) for e, h in zip(EPSILONS, hits, strict=True)},
                position_sigma={str(e): s for e, s in zip(EPSILONS, sigmas, strict=True)},
                t=float(paired_t(hits[1], hits[0])), time_s=round(time.perf_counter() - t, 1))


def table(paths):
    """One line per data set and framing: each seed's ``0.5 / 0.1 (t)``."""
    lines = ["| data set | framing | training sets | each seed: epsilon 0.5 / 0.1 (t of 0.1 minus 0.5) |",
             "|---|---|---:|---|"]
    for (name, framing), recs in read_rows(paths).items():
        cells = [f"{r['scores']['0.5']:.2f} / {r['scores']['0.1']:.2f} ({r['t']:+.1f})"
                 for r in sorted(recs, key=lambda r: r["seed"])]
        lines.append(f"| {name} | {framing} | {recs[0]['n_train']} | {'; '.join(cells)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    runs_main(__doc__, run, table)
