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
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import GridSearchCV, StratifiedKFold  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402
from skset.datasets import load_japanese_vowels, read_ts  # noqa: E402

DATASETS = ["JapaneseVowels", "BasicMotions", "ACSF1", "ArrowHead", "GunPoint", "ItalyPowerDemand",
            "OSULeaf", "PickupGestureWiimoteZ"]
EQUAL_LENGTH = {"JapaneseVowels": "JapaneseVowels_eq", "PickupGestureWiimoteZ":
                "PickupGestureWiimoteZ_eq"}
SEQ_WINDOW = 10
SEQ_POSITION_SIGMA = 0.1
GRID = {"otk__epsilon": [0.1, 0.5, 1.0], "otk__n_supports": [5, 10, 20], "clf__C": [0.1, 1.0, 10.0]}
# lbfgs on a few dozen sets of 1,000-6,000 features can take minutes to reach its tolerance (110 s
# and 831 iterations for one fit on ACSF1 here); inside the grid it stops at GRID_MAX_ITER
# iterations (the refit on the whole training set and every default row use DEFAULT_MAX_ITER)
DEFAULT_MAX_ITER = 1000
GRID_MAX_ITER = 100


def _aeon_dir(name):
    import aeon

    return os.path.join(os.path.dirname(aeon.__file__), "datasets", "data", name)


def load(name, equal_length=False):
    """``X_train, X_test, y_train, y_test``: lists of (n_i, d) arrays and label arrays."""
    if name == "JapaneseVowels" and not equal_length:
        X_tr, y_tr = load_japanese_vowels(subset="train", return_X_y=True)
        X_te, y_te = load_japanese_vowels(subset="test", return_X_y=True)
        return X_tr, X_te, y_tr, y_te
    fname = EQUAL_LENGTH.get(name, name) if equal_length else name
    folder = _aeon_dir(name)
    X_tr, y_tr = read_ts(os.path.join(folder, f"{fname}_TRAIN.ts"))
    X_te, y_te = read_ts(os.path.join(folder, f"{fname}_TEST.ts"))
    return X_tr, X_te, y_tr, y_te


def framing(name, d, kind, nystrom_over, otk_over):
    """Estimator parameters of a framing: the data-structure options, then the overrides."""
    nys, otk = {}, {}
    if kind in ("seq", "pos") and d == 1:
        nys["window"] = SEQ_WINDOW
    if kind == "pos":
        otk["position_sigma"] = SEQ_POSITION_SIGMA
    nys.update(nystrom_over)
    otk.update(otk_over)
    return nys, otk


def clf(max_iter=DEFAULT_MAX_ITER):
    return LogisticRegression(max_iter=max_iter)


def run_skset(name, kind, seeds, nystrom_over, otk_over, grid, cache):
    X_tr, X_te, y_tr, y_te = load(name)
    d = X_tr[0].shape[1]
    nys_p, otk_p = framing(name, d, kind, nystrom_over, otk_over)
    rows = {}
    for seed in seeds:
        t = time.perf_counter()
        nys = NystromFeatures(random_state=seed, **nys_p)
        F_tr = nys.fit_transform(X_tr)
        F_te = nys.transform(X_te)
        t_nys = time.perf_counter() - t
        t = time.perf_counter()
        pipe = Pipeline([("otk", OTKEmbedding(random_state=seed, **otk_p)), ("clf", clf())])
        acc = pipe.fit(F_tr, y_tr).score(F_te, y_te)
        rows.setdefault("otk", []).append((acc, t_nys + time.perf_counter() - t))
        mean_p = {k: v for k, v in otk_p.items() if k not in ("position_sigma", "n_supports")}
        mean = Pipeline([("otk", OTKEmbedding(n_supports=1, random_state=seed, **mean_p)),
                         ("clf", clf())])
        rows.setdefault("mean", []).append((mean.fit(F_tr, y_tr).score(F_te, y_te), None))
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
                rows["otk_grid"] = [(pipe.score(F_te, y_te), time.perf_counter() - t,
                                     {k.split("__")[1]: v for k, v in best.items()})]
                mean = Pipeline([("otk", OTKEmbedding(n_supports=1, random_state=seed, **mean_p)),
                                 ("clf", clf(GRID_MAX_ITER))], memory=mem)
                search = GridSearchCV(mean, {"clf__C": GRID["clf__C"]}, cv=cv, refit=False
                                      ).fit(F_tr, y_tr)
                mean.set_params(memory=None, clf=clf(), **search.best_params_).fit(F_tr, y_tr)
                rows["mean_grid"] = [(mean.score(F_te, y_te), None,
                                      {"C": search.best_params_["clf__C"]})]
    return rows


def run_minirocket(name, seeds):
    from aeon.classification.convolution_based import MiniRocketClassifier

    X_tr, X_te, y_tr, y_te = load(name, equal_length=True)
    to3d = lambda X: np.stack([x.T for x in X]).astype(np.float64)  # noqa: E731  (n, d, length)
    out = []
    for seed in seeds:
        t = time.perf_counter()
        m = MiniRocketClassifier(random_state=seed).fit(to3d(X_tr), y_tr)
        out.append((float(np.mean(m.predict(to3d(X_te)) == y_te)), time.perf_counter() - t))
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
                merged.setdefault(name, {}).update(res)
    def fmt(r):
        sd = f" ± {100 * r['std']:.1f}" if len(r["runs"]) > 1 else ""
        return f"{100 * r['mean']:.1f}{sd}"

    lines = ["| data set | framing | OTK, defaults | OTK, grid search (best) | mean pooling | "
             "mean pooling, C tuned | MiniRocket |", "|---|---|---|---|---|---|---|"]
    stats = {}
    for name in DATASETS:
        if name not in merged:
            continue
        res = merged[name]
        rocket = fmt(res["minirocket"]) if "minirocket" in res else ""
        for kind in ("set", "seq", "pos"):
            if kind not in res:
                continue
            r = res[kind]
            grid = r.get("otk_grid")
            gtxt = ""
            if grid:
                bp = grid["best_params"]
                gtxt = (f"{100 * grid['mean']:.1f} (eps {bp['epsilon']}, p {bp['n_supports']}, "
                        f"C {bp['C']})")
            mg = fmt(r["mean_grid"]) if "mean_grid" in r else ""
            lines.append(f"| {name} | {kind} | {fmt(r['otk'])} | {gtxt} | {fmt(r['mean'])} | {mg} "
                         f"| {rocket} |")
            st = stats.setdefault(kind, {"wins": 0, "ties": 0, "n": 0, "gap": []})
            st["n"] += 1
            d = r["otk"]["mean"] - r["mean"]["mean"]
            st["wins"] += d > 1e-9
            st["ties"] += abs(d) <= 1e-9
            if grid:
                st["gap"].append((100 * (grid["mean"] - r["otk"]["mean"]), name))
    lines.append("")
    for kind, st in stats.items():
        worst = max(st["gap"]) if st["gap"] else (float("nan"), "")
        lines.append(f"- framing `{kind}`: OTK with defaults above mean pooling on {st['wins']} of "
                     f"{st['n']} data sets ({st['ties']} ties); largest shortfall from the grid "
                     f"search {worst[0]:.1f} points ({worst[1]})")
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
            d = load(name)[0][0].shape[1]
            for kind in args.framings:
                if kind == "seq" and d > 1 and "set" in res:
                    res[kind] = res["set"]  # no k-mers for multivariate frames: the same run
                    continue
                grid = not args.no_grid and (args.grid_framings is None
                                             or kind in args.grid_framings)
                rows = run_skset(name, kind, args.seeds, nystrom_over, otk_over, grid, cache)
                res[kind] = {k: summarise(v) for k, v in rows.items()}
                line = "  ".join(f"{k} {v['mean']:.4f}" for k, v in res[kind].items())
                print(f"{name:22s} {kind:4s} {line}", flush=True)
            if not args.no_rocket:
                res["minirocket"] = summarise(run_minirocket(name, args.seeds))
                print(f"{name:22s} minirocket {res['minirocket']['mean']:.4f}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
