"""Real-data suite: the README pipeline on several kinds of set/sequence data, beside its peers.

Data sets (no download: JapaneseVowels is bundled with skset, the others are the UEA/UCR files that
aeon's wheel ships in its package data; ``pip install -e ".[bench]"`` installs aeon):

============================  ==============  ====  ======  ========  =====
name                          kind            d     train   test      n_i
============================  ==============  ====  ======  ========  =====
JapaneseVowels                multivariate    12    270     370       7-29
BasicMotions                  multivariate    6     40      40        100
ACSF1                         univariate      1     100     100       1460
ArrowHead                     univariate      1     36      175       251
GunPoint                      univariate      1     50      150       150
ItalyPowerDemand              univariate      1     67      1029      24
OSULeaf                       univariate      1     200     242       427
PickupGestureWiimoteZ         univariate      1     50      50        29-361
============================  ==============  ====  ======  ========  =====

Three framings of the same series (a user chooses by what the data is, everything else default):

* ``set``: each series is the set of its time points (``NystromFeatures()``, ``OTKEmbedding()``:
  every skset default, order ignored);
* ``seq``: each series is a set of k-mers, ``window=10`` consecutive time points for univariate
  series (the paper's protein setting in miniature: 10-mers, no positional encoding; multivariate
  frames stay single elements);
* ``pos``: the same k-mers with positional weighting ``position_sigma=0.1`` (the value the paper
  selects in D.4).

Rows per data set and framing (the same Nystrom features feed every skset row):

* ``otk``: ``Pipeline([NystromFeatures(), OTKEmbedding(), LogisticRegression()])`` with defaults;
* ``otk_grid``: the same under ``GridSearchCV`` (3-fold) over ``epsilon``, ``n_supports`` and ``C``;
* ``mean``: mean pooling of the same features (``OTKEmbedding(n_supports=1)`` without positions is
  exactly the mean, centred and scaled the same way) with the same classifier; ``mean_grid`` tunes C;
* ``minirocket``: aeon's ``MiniRocketClassifier`` (MiniRocket + ridge), the time-series practitioner's
  first try, on the equal-length versions aeon ships for the variable-length sets.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_suite.py --seeds 0 1 2 --out benchmarks/results/suite.json

Options ``--nystrom`` / ``--otk`` take JSON overrides of the estimators' parameters (this is how the
defaults were compared, see ``benchmarks/results/suite.md``).
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.linear_model import (
    LogisticRegression,  # noqa: E402
    LogisticRegressionCV,  # noqa: E402
)
from sklearn.metrics import roc_auc_score  # noqa: E402
from sklearn.model_selection import GridSearchCV, StratifiedKFold  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from suite_data import DATASETS, KINDS, load, series_for_rocket  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402

# the element map before issue 23 (one fixed choice), for the side-by-side rows
FIXED_MAP = {"standardize": True, "normalize": False, "keep_norm": True, "bandwidth": 0.5}
RAW_CS = [0.01, 0.1, 1.0, 10.0, 100.0]

SEQ_WINDOW = 10
SEQ_POSITION_SIGMA = 0.1
GRID = {"otk__epsilon": [0.1, 0.5, 1.0], "otk__n_supports": [5, 10, 20], "clf__C": [0.1, 1.0, 10.0]}
# lbfgs on a few dozen sets of 1,000-6,000 features can take minutes to reach its tolerance (110 s
# and 831 iterations for one fit on ACSF1 here); inside the grid it stops at GRID_MAX_ITER
# iterations (the refit on the whole training set and every default row use DEFAULT_MAX_ITER)
DEFAULT_MAX_ITER = 1000
GRID_MAX_ITER = 100


def framing(name, d, kind, nystrom_over, otk_over):
    """Estimator parameters of a framing: the data-structure options, then the overrides."""
    nys, otk = {}, {}
    if kind in ("seq", "pos") and KINDS[name]["window"]:
        nys["window"] = KINDS[name]["window"]
    if kind == "pos":
        otk["position_sigma"] = SEQ_POSITION_SIGMA
    nys.update(nystrom_over)
    otk.update(otk_over)
    return nys, otk


def clf(max_iter=DEFAULT_MAX_ITER):
    return LogisticRegression(max_iter=max_iter)


def score(model, X, y, name):
    """Accuracy, or ROC AUC for the data sets scored by it."""
    if KINDS[name]["metric"] == "auc":
        return float(roc_auc_score(y, model.decision_function(X)))
    return float(model.score(X, y))


def pool_raw(X, how):
    """Mean (``mean``) or mean and max (``meanmax``) of the raw elements of each set."""
    if how == "mean":
        return np.stack([x.mean(0) for x in X])
    return np.stack([np.concatenate([x.mean(0), x.max(0)]) for x in X])


def run_raw(name, kind, nys_p):
    """The set practitioner's first try: pooled raw elements (k-mers in the k-mer framings) +
    StandardScaler + LogisticRegression with C chosen by 3-fold CV."""
    X_tr, X_te, y_tr, y_te = load(name)
    if nys_p.get("window", 1) > 1:
        from skset._sets import kmer_windows

        X_tr, X_te = kmer_windows(X_tr, nys_p["window"]), kmer_windows(X_te, nys_p["window"])
    rows = {}
    for how in ("mean", "meanmax"):
        t = time.perf_counter()
        model = Pipeline([("scale", StandardScaler()), ("clf", LogisticRegressionCV(
            Cs=RAW_CS, cv=3, max_iter=DEFAULT_MAX_ITER))])
        model.fit(pool_raw(X_tr, how), y_tr)
        rows["raw_" + how] = [(score(model, pool_raw(X_te, how), y_te, name),
                               time.perf_counter() - t)]
    return rows


SUPERVISED = ("otk_clf", "set_transformer", "deep_sets")


def run_supervised(name, kind, nys_p, seeds, rows_wanted):
    """The trained models with defaults (``random_state=seed``): ``OTKClassifier`` with the
    framing's k-mer window, ``SetTransformerClassifier`` and ``DeepSetsClassifier`` on the
    framing's elements (k-mers of a univariate series in the k-mer framings)."""
    from skset import DeepSetsClassifier, OTKClassifier, SetTransformerClassifier

    X_tr, X_te, y_tr, y_te = load(name)
    w = nys_p.get("window", 1)
    if w > 1:
        from skset._sets import kmer_windows

        K_tr, K_te = kmer_windows(X_tr, w), kmer_windows(X_te, w)
    else:
        K_tr, K_te = X_tr, X_te
    make = {"otk_clf": lambda s: (OTKClassifier(window=w, random_state=s), X_tr, X_te),
            "set_transformer": lambda s: (SetTransformerClassifier(random_state=s), K_tr, K_te),
            "deep_sets": lambda s: (DeepSetsClassifier(random_state=s), K_tr, K_te)}
    rows = {}
    for row in rows_wanted:
        for seed in seeds:
            model, A, B = make[row](seed)
            t = time.perf_counter()
            model.fit(A, y_tr)
            if KINDS[name]["metric"] == "auc":
                value = float(roc_auc_score(y_te, model.predict_proba(B)[:, 1]))
            else:
                value = float(model.score(B, y_te))
            rows.setdefault(row, []).append((value, time.perf_counter() - t))
    return rows


def spread(name, nys_p, seed=0):
    """std/mean of the distances of 2,000 random pairs of standardised training elements
    (k-mers in the k-mer framings), the element dimension and the median set size."""
    X_tr = load(name)[0]
    rng = np.random.RandomState(seed)
    flat = np.concatenate(X_tr)
    flat = (flat - flat.mean(0)) / np.where(flat.std(0) > 0, flat.std(0), 1.0)
    w = nys_p.get("window", 1)
    lengths = np.array([len(x) for x in X_tr])
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    ok = np.concatenate([s + np.arange(n - w + 1) for s, n in zip(starts, lengths)])
    a, b = rng.choice(ok, 2000), rng.choice(ok, 2000)
    gather = lambda i: flat[i[:, None] + np.arange(w)].reshape(len(i), -1)  # noqa: E731
    dist = np.linalg.norm(gather(a) - gather(b), axis=1)
    return {"spread": float(dist.std() / dist.mean()), "d": int(flat.shape[1] * w),
            "n_median": float(np.median(lengths - w + 1))}


def run_skset(name, kind, seeds, nystrom_over, otk_over, grid, cache, fixed_row=True):
    X_tr, X_te, y_tr, y_te = load(name)
    d = X_tr[0].shape[1]
    nys_p, otk_p = framing(name, d, kind, nystrom_over, otk_over)
    rows = {}
    for seed in seeds:
        t = time.perf_counter()
        nys = NystromFeatures(random_state=seed, **nys_p)
        F_tr = nys.fit_transform(X_tr, y_tr)  # as a Pipeline does: y reaches every step
        F_te = nys.transform(X_te)
        t_nys = time.perf_counter() - t
        t = time.perf_counter()
        pipe = Pipeline([("otk", OTKEmbedding(random_state=seed, **otk_p)), ("clf", clf())])
        acc = score(pipe.fit(F_tr, y_tr), F_te, y_te, name)
        rows.setdefault("otk", []).append((acc, t_nys + time.perf_counter() - t, {
            k: getattr(nys, k + "_") for k in ("standardize", "normalize", "keep_norm")} | {
            "bandwidth": nys.relative_bandwidth_}))
        mean_p = {k: v for k, v in otk_p.items() if k not in ("position_sigma", "n_supports")}
        mean = Pipeline([("otk", OTKEmbedding(n_supports=1, random_state=seed, **mean_p)),
                         ("clf", clf())])
        rows.setdefault("mean", []).append((score(mean.fit(F_tr, y_tr), F_te, y_te, name), None))
        if fixed_row and not nystrom_over:  # the same pipeline with the pre-issue-23 fixed map
            t = time.perf_counter()
            fixed = Pipeline([("nys", NystromFeatures(random_state=seed, **nys_p, **FIXED_MAP)),
                              ("otk", OTKEmbedding(random_state=seed, **otk_p)), ("clf", clf())])
            rows.setdefault("otk_fixed", []).append((score(fixed.fit(X_tr, y_tr), X_te, y_te, name),
                                                     time.perf_counter() - t))
        if grid and seed == seeds[0]:
            cv = StratifiedKFold(3, shuffle=True, random_state=seed)
            t = time.perf_counter()
            with tempfile.TemporaryDirectory(dir=cache) as mem:
                pipe = Pipeline([("otk", OTKEmbedding(random_state=seed, **otk_p)),
                                 ("clf", clf(GRID_MAX_ITER))], memory=mem)
                search = GridSearchCV(pipe, GRID, cv=cv, refit=False).fit(F_tr, y_tr)
                best = search.best_params_
                pipe = Pipeline([("otk", OTKEmbedding(random_state=seed, **otk_p)), ("clf", clf())]
                                ).set_params(**best).fit(F_tr, y_tr)
                rows["otk_grid"] = [(score(pipe, F_te, y_te, name), time.perf_counter() - t,
                                     {k.split("__")[1]: v for k, v in best.items()})]
                mean = Pipeline([("otk", OTKEmbedding(n_supports=1, random_state=seed, **mean_p)),
                                 ("clf", clf(GRID_MAX_ITER))], memory=mem)
                search = GridSearchCV(mean, {"clf__C": GRID["clf__C"]}, cv=cv, refit=False
                                      ).fit(F_tr, y_tr)
                mean.set_params(memory=None, clf=clf(), **search.best_params_).fit(F_tr, y_tr)
                rows["mean_grid"] = [(score(mean, F_te, y_te, name), None,
                                      {"C": search.best_params_["clf__C"]})]
    return rows


def run_minirocket(name, seeds):
    from aeon.classification.convolution_based import MiniRocketClassifier

    X_tr, X_te, y_tr, y_te = series_for_rocket(name)
    out = []
    for seed in seeds:
        t = time.perf_counter()
        m = MiniRocketClassifier(random_state=seed).fit(X_tr, y_tr)
        out.append((float(np.mean(m.predict(X_te) == y_te)), time.perf_counter() - t))
    return out


def summarise(rows):
    accs = [r[0] for r in rows]
    return {"mean": float(np.mean(accs)), "std": float(np.std(accs)), "runs": [float(a) for a in accs],
            "time_s": float(np.median([r[1] for r in rows if r[1] is not None]))
            if any(r[1] is not None for r in rows) else None,
            "best_params": rows[0][2] if len(rows[0]) > 2 else None}


def table(paths):
    """Markdown table of one or more result files (``--table a.json b.json``)."""
    merged = {}
    for path in paths:
        with open(path) as f:
            for name, res in json.load(f)["results"].items():
                into = merged.setdefault(name, {})
                for key, value in res.items():  # rows of one framing from several files
                    if key in ("set", "seq", "pos") and key in into:
                        into[key] = {**into[key], **value}
                    else:
                        into[key] = value

    def fmt(r):
        if r is None:
            return ""
        sd = f" ± {100 * r['std']:.1f}" if len(r["runs"]) > 1 else ""
        return f"{100 * r['mean']:.1f}{sd}"

    def short(c):
        return (f"{'std' if c['standardize'] else 'raw'}"
                f"{', sphere' if c['normalize'] else ''}"
                f"{'' if not c['normalize'] else (' + norm' if c['keep_norm'] else ' dir')}"
                f", bw {c['bandwidth']}")

    lines = ["| data set | kind | framing | d | median n | spread | OTK, defaults | OTK, fixed map "
             "(before) | OTK, grid | Nystrom mean | raw mean | raw mean+max | OTKClassifier | "
             "Set Transformer | Deep Sets | MiniRocket | map chosen (seed 0) |", "|" + "---|" * 17]
    gaps = []
    for name in DATASETS:
        if name not in merged:
            continue
        res = merged[name]
        rocket = fmt(res.get("minirocket"))
        for kind in ("set", "seq", "pos"):
            r = res.get(kind)
            if r is None or (kind == "seq" and r == res.get("set")) or "data" not in r:
                continue
            g = r.get("otk_grid")
            gtxt = f"{100 * g['mean']:.1f}" if g else ""
            dat = r["data"]
            metric = " (AUC)" if KINDS[name]["metric"] == "auc" else ""
            lines.append(
                f"| {name}{metric} | {KINDS[name]['kind']} | {kind} | {dat['d']} | "
                f"{dat['n_median']:.0f} | {dat['spread']:.2f} | {fmt(r['otk'])} | "
                f"{fmt(r.get('otk_fixed'))} | {gtxt} | {fmt(r.get('mean'))} | "
                f"{fmt(r.get('raw_mean'))} | {fmt(r.get('raw_meanmax'))} | "
                f"{fmt(r.get('otk_clf'))} | {fmt(r.get('set_transformer'))} | "
                f"{fmt(r.get('deep_sets'))} | {rocket} | "
                f"{short(r['otk']['best_params']) if r['otk'].get('best_params') else ''} |")
            raw = max(r["raw_mean"]["mean"], r["raw_meanmax"]["mean"])
            gaps.append((100 * (r["otk"]["mean"] - raw), name, kind,
                         100 * (g["mean"] - r["otk"]["mean"]) if g else None,
                         100 * (r["otk"]["mean"] - r["otk_fixed"]["mean"]) if "otk_fixed" in r
                         else None))
    lines.append("")
    if gaps:
        worst = min(gaps)
        lines.append(f"- OTK with defaults minus the better raw-pooling baseline: worst "
                     f"{worst[0]:+.1f} points ({worst[1]}, {worst[2]}); at or above it (within 1 "
                     f"point) on {sum(g[0] >= -1 for g in gaps)} of {len(gaps)} rows")
        grid = [g for g in gaps if g[3] is not None]
        if grid:
            w = max(grid, key=lambda g: g[3])
            lines.append(f"- largest shortfall of the defaults from the grid search: {w[3]:.1f} "
                         f"points ({w[1]}, {w[2]})")
        fx = [g[4] for g in gaps if g[4] is not None]
        if fx:
            lines.append(f"- defaults ('auto' map) minus the fixed map: mean {np.mean(fx):+.2f} "
                         f"points over {len(fx)} rows, worst {min(fx):+.1f}, best {max(fx):+.1f}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="*", default=DATASETS)
    ap.add_argument("--framings", nargs="*", default=["set", "seq", "pos"],
                    choices=["set", "seq", "pos"])
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument("--nystrom", default="{}", help="JSON overrides of NystromFeatures parameters")
    ap.add_argument("--otk", default="{}", help="JSON overrides of OTKEmbedding parameters")
    ap.add_argument("--no-grid", action="store_true")
    ap.add_argument("--grid-framings", nargs="*", default=None,
                    help="framings that get the grid search (default: all)")
    ap.add_argument("--no-rocket", action="store_true")
    ap.add_argument("--rows", nargs="*", default=[], choices=SUPERVISED,
                    help="trained models with defaults to add (slow on the larger sets)")
    ap.add_argument("--skip-otk", action="store_true",
                    help="only the raw baselines and the --rows models (merge with --table)")
    ap.add_argument("--no-fixed", action="store_true",
                    help="skip the row of the pre-issue-23 fixed element map")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    ap.add_argument("--table", nargs="*", default=None,
                    help="print the markdown table of these result files and exit")
    args = ap.parse_args()
    if args.table:
        print(table(args.table))
        return
    nystrom_over, otk_over = json.loads(args.nystrom), json.loads(args.otk)
    warnings.filterwarnings("ignore", category=UserWarning)
    results = {"args": vars(args), "results": {}}
    with tempfile.TemporaryDirectory() as cache:
        for name in args.datasets:
            res = results["results"][name] = {}
            for kind in args.framings:
                if kind in ("seq", "pos") and not KINDS[name]["window"]:
                    if kind == "seq" and "set" in res:
                        res[kind] = res["set"]  # no k-mers for frames or bags: the same run
                    continue
                grid = not args.no_grid and (args.grid_framings is None
                                             or kind in args.grid_framings)
                rows = {} if args.skip_otk else run_skset(
                    name, kind, args.seeds, nystrom_over, otk_over, grid, cache,
                    fixed_row=not args.no_fixed)
                nys_p = framing(name, 1, kind, {}, {})[0]
                rows.update(run_raw(name, kind, nys_p))
                if args.rows:
                    rows.update(run_supervised(name, kind, nys_p, args.seeds, args.rows))
                res[kind] = {k: summarise(v) for k, v in rows.items()}
                res[kind]["data"] = spread(name, nys_p)
                line = "  ".join(f"{k} {v['mean']:.4f}" for k, v in res[kind].items()
                                 if "mean" in v)
                chosen = res[kind]["otk"]["best_params"] if "otk" in res[kind] else ""
                print(f"{name:22s} {kind:4s} {line}  {chosen}", flush=True)
            if args.out:  # after every data set: a partial run keeps what it measured
                with open(args.out, "w") as f:
                    json.dump(results, f, indent=1)
            if not args.no_rocket and KINDS[name]["series"]:
                res["minirocket"] = summarise(run_minirocket(name, args.seeds))
                print(f"{name:22s} minirocket {res['minirocket']['mean']:.4f}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
