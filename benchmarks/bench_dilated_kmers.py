"""Dilated k-mers of univariate series: what the k-mer width rule cannot reach.

``window="auto"`` compares single elements with k-mers of 3, 5, 10 and 20 consecutive steps that
every training set can hold twice, so a k-mer never spans more than half of the shortest series.
This script measures k-mers that span more of the series with few coordinates: ``k`` steps
``d`` apart (``x[t], x[t+d], ..., x[t+(k-1)d]``, dilation ``d``), coded as level + shape (as
``NystromFeatures`` codes k-mers by default), a series shorter than the span padded by repeating
its last step. Each dilation of a configuration gets its own ``NystromFeatures(window=1)`` and
``OTKEmbedding`` (every other parameter at its default, positions chosen from the labels); the
embeddings of several dilations are concatenated before ``LogisticRegression``. The row
``k=10, d=1`` is the default pipeline with ``window=10``.

    cd benchmarks
    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python bench_dilated_kmers.py \\
        --datasets PickupGestureWiimoteZ ArrowHead GunPoint ItalyPowerDemand --seeds 0 1 2 \\
        --json-rows results/dilated_kmers.jsonl

Configurations (``--configs``): ``k:d1,d2,...``, e.g. ``10:1`` (10-mers), ``10:1,2,4,8`` (four
dilations concatenated), ``5:16``.

``--rule`` prints what ``NystromFeatures`` with defaults takes (``window_``, ``dilation_``) and
the paired t of each dilated pair its rule scored over the width it took:

    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python bench_dilated_kmers.py --rule --datasets \
        PickupGestureWiimoteZ ArrowHead GunPoint ItalyPowerDemand OSULeaf ACSF1 WatchMagnitude \
        GeneFamilies

``--proxy k:d ...`` prints instead what the width rule's proxy
(:func:`skset._map_selection.select_window`, level + shape k-mers, the element map that
``NystromFeatures`` chooses on the training sets) scores for its own candidates and for dilated
k-mers added to them, and which it would take (the rule run unchanged, its candidate list and its
k-mer sampler extended for the run):

    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python bench_dilated_kmers.py --datasets \
        PickupGestureWiimoteZ ArrowHead GunPoint ItalyPowerDemand OSULeaf ACSF1 WatchMagnitude \
        --proxy 10:8 10:4 5:16
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import suite_data  # noqa: E402
import torch  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402
from skset._sets import kmer_level_shape  # noqa: E402

CONFIGS = ["10:1", "10:8", "5:16", "10:1,2,4,8"]


def proxy(name, extra, seed):
    """The width rule's scores with the dilated candidates ``extra`` ((k, d) pairs) added."""
    import skset._map_selection as ms

    X_tr, _, y_tr, _ = suite_data.load(name)
    # the map the rule scores with, and the width it takes among contiguous k-mers
    ny = NystromFeatures(random_state=seed, dilation=1).fit(X_tr, y_tr)
    choice = {"standardize": ny.standardize_, "normalize": ny.normalize_,
              "keep_norm": ny.keep_norm_, "bandwidth": ny.relative_bandwidth_}
    sampler, widths = ms._sampled_rows, ms.window_candidates

    def sampled(sets, rng, per_set=ms.MAX_PER_SET, window=1, coding="plain", dilation=1):
        if not isinstance(window, tuple):
            return sampler(sets, rng, per_set, window, coding, dilation)
        return sampler(sets, rng, per_set, window[0], coding, window[1])

    ms._sampled_rows = sampled
    ms.window_candidates = lambda lengths: widths(lengths) + list(extra)
    try:
        taken, _, scores = ms.select_window(X_tr, y_tr, kmer_coding="level_shape", fixed=choice,
                                         default=choice, n_components=ny.n_components,
                                         eigenvalue_floor=ny.eigenvalue_floor,
                                         rng=np.random.RandomState(seed))
    finally:
        ms._sampled_rows, ms.window_candidates = sampler, widths
    return ny.window_, taken, scores


def rule(name, seed):
    """What ``NystromFeatures(random_state=seed)`` takes (``window_``, ``dilation_``) and the
    paired t of each dilated pair it scored over the width of its own test (its per-set errors
    recorded as the rule computes them)."""
    import skset._map_selection as ms
    import skset.kernel_approximation as ka
    from skset._stats import paired_t

    X_tr, _, y_tr, _ = suite_data.load(name)
    errors, real, select = [], ms.pooled_map_errors, ka.select_window

    def recorded(*a, **k):
        errors.append(np.asarray(real(*a, **k)))
        return errors[-1]

    def selecting(*a, **k):  # the width rule's errors only (not the map's)
        ms.pooled_map_errors = recorded
        try:
            return select(*a, **k)
        finally:
            ms.pooled_map_errors = real

    ka.select_window = selecting
    try:
        ny = NystromFeatures(random_state=seed).fit(X_tr, y_tr)
    finally:
        ka.select_window = select
    scored = [w for w, _ in (ny.window_scores_ or [])]
    pairs = [(w, e) for w, e in zip(scored, errors) if isinstance(w, tuple)]
    if not pairs:
        return ny, []
    widths = [(w, e) for w, e in zip(scored, errors) if not isinstance(w, tuple)]
    passing = [we for we in widths[1:] if paired_t(widths[0][1], we[1], flat=0.0) > ms.MIN_T]
    width_err = min(passing, key=lambda we: we[1].mean())[1]
    return ny, [(w, paired_t(width_err, e, flat=0.0)) for w, e in pairs]


def run(name, config, seed):
    k, dils = config.split(":")
    k, dils = int(k), [int(d) for d in dils.split(",")]
    X_tr, X_te, y_tr, y_te = suite_data.load(name)
    t = time.perf_counter()
    F_tr, F_te, positions = [], [], []
    for d in dils:
        A, B = (kmer_level_shape(X, k, dilation=d) if k > 1 else X for X in (X_tr, X_te))
        ny = NystromFeatures(window=1, random_state=seed).fit(A, y_tr)
        A, B = ny.transform(A), ny.transform(B)
        otk = OTKEmbedding(random_state=seed).fit(A, y_tr)
        F_tr.append(otk.transform(A))
        F_te.append(otk.transform(B))
        positions.append(otk.position_sigma_)
    clf = LogisticRegression(max_iter=1000).fit(np.hstack(F_tr), y_tr)
    score = 100 * clf.score(np.hstack(F_te), y_te)
    return score, time.perf_counter() - t, positions


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="*", default=["PickupGestureWiimoteZ"])
    ap.add_argument("--configs", nargs="*", default=CONFIGS)
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument("--json-rows", default=None)
    ap.add_argument("--proxy", nargs="*", default=None, metavar="K:D")
    ap.add_argument("--rule", action="store_true",
                    help="print the estimator's dilation rule: pairs scored and their paired t")
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    warnings.filterwarnings("ignore")
    if args.rule:
        print("| data set | seed | window_ | dilation_ | paired t over the width (pair: t) |")
        print("|---|---|---|---|---|")
        for name in args.datasets:
            for seed in args.seeds:
                ny, ts = rule(name, seed)
                text = ", ".join(f"{k}:{d} {t:.2f}" for (k, d), t in ts) or "(no width taken)"
                print(f"| {name} | {seed} | {ny.window_} | {ny.dilation_} | {text} |", flush=True)
        return
    if args.proxy:
        extra = [tuple(int(v) for v in c.split(":")) for c in args.proxy]
        print("| data set | seed | window_ (the estimator) | taken with dilations | "
              "scores (minus the mean leave-one-out error) |")
        print("|---|---|---|---|---|")
        for name in args.datasets:
            for seed in args.seeds:
                fitted, taken, scores = proxy(name, extra, seed)
                text = ", ".join(f"{':'.join(map(str, w)) if isinstance(w, tuple) else w} "
                                 f"{v:.3f}" for w, v in scores)
                taken = ":".join(map(str, taken)) if isinstance(taken, tuple) else taken
                print(f"| {name} | {seed} | {fitted} | {taken} | {text} |", flush=True)
        return
    print("| data set | k:dilations | accuracy (seeds) | fit + predict s | positions |")
    print("|---|---|---|---|---|")
    for name in args.datasets:
        for config in args.configs:
            rows = [run(name, config, s) for s in args.seeds]
            scores = [r[0] for r in rows]
            if args.json_rows:
                with open(args.json_rows, "a") as f:
                    for s, (score, sec, pos) in zip(args.seeds, rows):
                        f.write(json.dumps({"dataset": name, "config": config, "seed": s,
                                            "score": score, "time_s": sec,
                                            "position_sigma": pos}) + "\n")
            print(f"| {name} | {config} | {np.mean(scores):.1f} "
                  f"({', '.join(f'{v:.1f}' for v in scores)}) | "
                  f"{np.mean([r[1] for r in rows]):.1f} | {rows[0][2]} |", flush=True)


if __name__ == "__main__":
    main()
