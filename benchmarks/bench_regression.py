"""Regression rows: the default set regressors against predicting the training mean.

Every row is a small regression problem (50-200 training sets) scored by test RMSE:

* ``maxreg``: the Set Transformer paper's max regression (sets of 1-10 reals from U(0, 100), the
  target the maximum; ``bench_st_tasks.data``), 200 training sets;
* ``normalvar``: Normal Var (Zhang et al. 2022; ``skset.datasets.make_normal_var``, as in
  ``bench_normal_var.py``), sets of 50 draws, 200 training sets;
* ``mi``: the Deep Sets paper's population statistics (Zaheer et al. 2017, Section 4.1.1): a set
  of 50-100 draws of a 2-D Gaussian whose covariance is a rotation by a random angle of
  ``diag(1, 0.1)``; the target is the mutual information of its two coordinates,
  ``-log(1 - rho^2) / 2``; 200 training sets;
* real suite sets (``suite_data.py``) with a target that is a fixed function of the set plus
  noise, at signal-to-noise ratios (signal variance / noise variance) 0 (a pure-noise target),
  0.25 and 1: JapaneseVowels (frames, 100 training sets), GunPoint as a set of 10-mers (train and
  test pooled, 100 training sets), MNIST bags (150 training bags). The signal is
  ``tanh(u . m) + (v . s)^2 / 2`` with ``m``, ``s`` the set's mean and standard deviation
  (features standardised on the training elements) and ``u``, ``v`` random unit directions
  scaled so that each projection has unit variance over the training sets; the signal is then
  standardised on the training sets and the noise is Gaussian.

* real series with real targets, the two time-series extrinsic regression sets aeon's wheel
  ships (``aeon.datasets``; the archive's train/test split, each series the set of its time
  points): ``Covid3Month`` (a country's daily Covid-19 cases over three months, univariate, 84
  days, 140 / 61 series; the target, the death rate at the end of the period) and
  ``CardanoSentiment`` (24 hours of Cardano's price and volume, 2 channels, 74 / 33 series; the
  target, the sentiment of the day's posts about it). On these rows the pipeline is fitted with
  the targets (the map, the k-mer width and the positions chosen from them, as in a
  ``Pipeline`` fitted on ``(X, y)``), and two series models run beside: aeon's
  ``MiniRocketRegressor`` (``minirocket``, the field's first try) and
  ``DilatedKernelFeatures -> StandardScaler -> RidgeCV`` (``dilated-kernels``, the same grid).

Each row runs several seeds (the seed draws the target's noise, the split where there is one,
and the models' ``random_state``). Columns: the training mean; pooled-feature ridge (mean or
mean+max pooling of the raw elements, ``StandardScaler``, ``RidgeCV`` over
``alphas=np.logspace(-3, 5, 17)``); the default pipeline ``NystromFeatures -> OTKEmbedding ->
RidgeCV`` (the same grid; and ``RidgeCV()``'s own default grid); ``OTKRegressor``,
``SetTransformerRegressor``, ``DeepSetsRegressor`` with every default (``random_state`` only).

    cd benchmarks
    OMP_WAIT_POLICY=PASSIVE python bench_regression.py --out results/regression.json
    OMP_WAIT_POLICY=PASSIVE python bench_regression.py --quick          # one seed, small rows
    # defaults of another copy of skset (a directory holding its ``skset`` package) beside:
    OMP_WAIT_POLICY=PASSIVE python bench_regression.py --before /path/to/old/tree --out ...
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

ALPHAS = np.logspace(-3, 5, 17)
SERIES_ROWS = ["Covid3Month", "CardanoSentiment"]  # real targets (aeon's bundled TSER sets)
ROWS = ["maxreg", "normalvar", "mi",
        *[f"{d}-snr{s}" for d in ("JapaneseVowels", "GunPoint10mer", "MNISTBags")
          for s in ("0", "0.25", "1")], *SERIES_ROWS]
#: the series models, run on SERIES_ROWS only
SERIES_MODELS = ["minirocket", "dilated-kernels"]
MODELS = ["mean", "ridge-mean", "ridge-meanmax", "pipeline", "pipeline-ridgecv-default",
          "OTKRegressor", "SetTransformerRegressor", "DeepSetsRegressor", *SERIES_MODELS]
#: variants of a default model (not run unless named in --models)
VARIANTS = {"OTKRegressor-no-validation": ("OTKRegressor", {"early_stopping": False}),
            "OTKRegressor-validation": ("OTKRegressor", {"early_stopping": "auto"}),
            "OTKRegressor-window-auto": ("OTKRegressor", {"window": "auto"}),
            "OTKRegressor-level-shape": ("OTKRegressor", {"kmer_coding": "level_shape"}),
            "DeepSetsRegressor-sized-mean": ("DeepSetsRegressor", {"pooling": "sized_mean"}),
            # the head's penalty at the lowest leave-one-out error (run_model patches the rule)
            "OTKRegressor-lowest-loo": ("OTKRegressor", {}),
            "OTKRegressor-alpha1": ("OTKRegressor", {"alpha": 1.0}),
            "OTKRegressor-alpha10": ("OTKRegressor", {"alpha": 10.0})}
TRAINED = ["pipeline", "pipeline-ridgecv-default", "OTKRegressor", "SetTransformerRegressor",
           "DeepSetsRegressor", "dilated-kernels"]


# -- data ------------------------------------------------------------------------------------------
def _mi_sets(n, seed, set_size=(50, 100)):
    """Deep Sets' rotated Gaussians: the mutual information of the two coordinates."""
    rng = np.random.RandomState(seed)
    X, y = [], []
    for _ in range(n):
        a = rng.uniform(0, np.pi)
        R = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
        C = R @ np.diag([1.0, 0.1]) @ R.T
        m = rng.randint(set_size[0], set_size[1] + 1)
        X.append(rng.multivariate_normal(np.zeros(2), C, size=m))
        rho = C[0, 1] / np.sqrt(C[0, 0] * C[1, 1])
        y.append(-0.5 * np.log(1.0 - rho ** 2))
    return X, np.asarray(y)


def _real_sets(name, quick):
    import suite_data

    from skset._sets import kmer_windows

    if name == "JapaneseVowels":
        X_tr, X_te, _, _ = suite_data.load("JapaneseVowels")
        n_tr = 100
        X = list(X_tr) + list(X_te)
        split = (np.arange(len(X_tr)), np.arange(len(X_tr), len(X)))  # archive's split
    elif name == "GunPoint10mer":
        X_tr, X_te, _, _ = suite_data.load("GunPoint")
        X = kmer_windows(list(X_tr) + list(X_te), 10)
        n_tr = 100
        split = None
    else:
        X_tr, X_te, _, _ = suite_data.load("MNISTBags200")
        X = list(X_tr) + list(X_te)
        n_tr = 150
        split = (np.arange(len(X_tr)), np.arange(len(X_tr), len(X)))
    if quick:
        n_tr = min(n_tr, 60)
    return [np.asarray(x, dtype=np.float64) for x in X], n_tr, split


def _real_row(name, snr, seed, quick):
    X, n_tr, split = _real_sets(name, quick)
    rng = np.random.RandomState(1000 + seed)
    if split is None:
        perm = rng.permutation(len(X))
        tr, te = perm[:n_tr], perm[n_tr:]
    else:
        tr = rng.choice(split[0], n_tr, replace=False)
        te = split[1]
    n_te = 100 if quick else 300
    te = te[:n_te] if split is None else rng.choice(te, min(n_te, len(te)), replace=False)
    # the target: a fixed function of the set (directions drawn with a row-level seed, the same
    # for every seed of the row) plus noise drawn per seed
    E = np.concatenate([X[i] for i in tr])
    mu, sd = E.mean(0), E.std(0)
    sd = np.maximum(sd, 0.1 * sd.mean())  # MNIST's border pixels: (nearly) constant
    means = np.stack([((x - mu) / sd).mean(0) for x in X])
    stds = np.stack([((x - mu) / sd).std(0) for x in X])
    drng = np.random.RandomState(7)
    u, v = drng.normal(size=means.shape[1]), drng.normal(size=means.shape[1])
    pu, pv = means @ u, stds @ v
    pu = (pu - pu[tr].mean()) / (pu[tr].std() + 1e-12)
    pv = (pv - pv[tr].mean()) / (pv[tr].std() + 1e-12)
    f = np.tanh(pu) + 0.5 * pv ** 2
    f = (f - f[tr].mean()) / f[tr].std()
    noise = rng.normal(size=len(X))
    y = np.sqrt(snr) * f + noise
    return [X[i] for i in tr], y[tr], [X[i] for i in te], y[te]


def _series_row(name):
    """The archive's train and test series of an aeon TSER set as sets of time points ``(n, C)``."""
    from aeon import datasets

    load = {"Covid3Month": datasets.load_covid_3month,
            "CardanoSentiment": datasets.load_cardano_sentiment}[name]
    out = []
    for split in ("train", "test"):
        X, y = load(split=split)
        out += [[np.ascontiguousarray(x.T, dtype=np.float64) for x in X], np.asarray(y, float)]
    return out


def row_data(row, seed, quick):
    if row in SERIES_ROWS:
        return _series_row(row)
    n_tr = 60 if quick else 200
    n_te = 200 if quick else 1000
    if row == "maxreg":
        from bench_st_tasks import data

        X, y, Xt, yt = data("maxreg", n_tr, n_te, seed)
        return list(X), np.asarray(y, float), list(Xt), np.asarray(yt, float)
    if row == "normalvar":
        from skset.datasets import make_normal_var

        X, y = make_normal_var(n_tr, set_size=50, random_state=seed)
        Xt, yt = make_normal_var(n_te, set_size=50, random_state=seed + 1000)
        return list(X), np.asarray(y, float), list(Xt), np.asarray(yt, float)
    if row == "mi":
        X, y = _mi_sets(n_tr, seed)
        Xt, yt = _mi_sets(n_te, seed + 1000)
        return X, y, Xt, yt
    name, snr = row.split("-snr")
    return _real_row(name, float(snr), seed, quick)


# -- models ----------------------------------------------------------------------------------------
def _pool(X, how):
    m = np.stack([x.mean(0) for x in X])
    return m if how == "mean" else np.hstack([m, np.stack([x.max(0) for x in X])])


def run_model(name, X, y, Xt, seed, labels=False):
    """Test predictions of model ``name`` (dict name -> predictions for the pipeline pair;
    ``labels``: the pipeline's embedding is fitted with ``y``)."""
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    import skset

    if name == "minirocket":  # equal-length series: (n, C, length)
        from aeon.regression.convolution_based import MiniRocketRegressor

        to3d = lambda S: np.stack([x.T for x in S])  # noqa: E731
        return {name: MiniRocketRegressor(random_state=seed).fit(to3d(X), y).predict(to3d(Xt))}
    if name == "dilated-kernels":
        m = make_pipeline(skset.DilatedKernelFeatures(random_state=seed), StandardScaler(),
                          RidgeCV(alphas=ALPHAS)).fit(X, y)
        return {name: m.predict(Xt)}
    if name == "mean":
        return {name: np.full(len(Xt), y.mean())}
    if name.startswith("ridge-"):
        how = name.split("-")[1]
        m = make_pipeline(StandardScaler(), RidgeCV(alphas=ALPHAS)).fit(_pool(X, how), y)
        return {name: m.predict(_pool(Xt, how))}
    if name == "pipeline":
        emb = make_pipeline(skset.NystromFeatures(random_state=seed),
                            skset.OTKEmbedding(random_state=seed)).fit(X, y if labels else None)
        Z, Zt = emb.transform(X), emb.transform(Xt)
        return {"pipeline": RidgeCV(alphas=ALPHAS).fit(Z, y).predict(Zt),
                "pipeline-ridgecv-default": RidgeCV().fit(Z, y).predict(Zt)}
    if name == "OTKRegressor-lowest-loo":  # alpha="auto" without the one-standard-error rule
        import functools
        from unittest import mock

        from skset.neural_network import _otk

        lowest = functools.partial(_otk.ridge_loo_alpha, one_se=False)
        with mock.patch.object(_otk, "ridge_loo_alpha", lowest):
            return {name: skset.OTKRegressor(random_state=seed).fit(X, y).predict(Xt)}
    cls, kw = VARIANTS.get(name, (name, {}))
    est = getattr(skset, cls)(random_state=seed, **kw)
    return {name: est.fit(X, y).predict(Xt)}


def run(rows, seeds, models, quick, threads, asinh=False):
    import torch

    torch.set_num_threads(threads)
    warnings.simplefilter("ignore")
    out = []
    for row in rows:
        for seed in seeds:
            X, y, Xt, yt = row_data(row, seed, quick)
            if asinh:  # every element's features through arcsinh (heavy-tailed counts)
                X, Xt = [np.arcsinh(x) for x in X], [np.arcsinh(x) for x in Xt]
            for name in models:
                if name == "pipeline-ridgecv-default":
                    continue  # made with "pipeline"
                if name in SERIES_MODELS and row not in SERIES_ROWS:
                    continue  # the series models read series only
                t = time.perf_counter()
                preds = run_model(name, X, y, Xt, seed, labels=row in SERIES_ROWS)
                secs = time.perf_counter() - t
                for key, p in preds.items():
                    rmse = float(np.sqrt(np.mean((np.asarray(p).reshape(yt.shape) - yt) ** 2)))
                    out.append(dict(row=row, seed=seed, model=key, rmse=rmse, seconds=secs,
                                    n_train=len(X), n_test=len(Xt)))
                print(f"{row:24s} seed {seed} {name:24s} " + " ".join(
                    f"{r['rmse']:.4f}" for r in out[-len(preds):]) + f" ({secs:.1f} s)",
                    flush=True)
    return out


# -- table -----------------------------------------------------------------------------------------
def table(results, before=None):
    """Markdown: mean test RMSE over the seeds per row and model, and each model / the mean
    predictor's RMSE (the bar: at most 1.05, and below the mean wherever pooled ridge is)."""
    def agg(res):
        d = {}
        for r in res:
            d.setdefault((r["row"], r["model"]), []).append(r["rmse"])
        return {k: float(np.mean(v)) for k, v in d.items()}

    a = agg(results)
    b = agg(before) if before else {}
    seeds_of = {}
    for r in results:
        seeds_of.setdefault(r["row"], set()).add(r["seed"])
    rows = list(dict.fromkeys(r["row"] for r in results))
    models = [m for m in [*MODELS, *VARIANTS] if any((r, m) in a for r in rows)]
    shown_before = [m for m in TRAINED[2:] if any((r, m) in b for r in rows)]
    head = ["row", "seeds", *models, *(f"{m} before" for m in shown_before)]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        mean = a.get((r, "mean"))
        best_pool = min(a.get((r, "ridge-mean"), np.inf), a.get((r, "ridge-meanmax"), np.inf))
        cells = [r, ",".join(map(str, sorted(seeds_of[r])))]
        for m in models:
            v = a.get((r, m))
            if v is None:
                cells.append("")
            elif m == "mean" or mean is None:  # without the mean's run: the RMSE itself
                cells.append(f"{v:.4f}")
            else:
                ratio = v / mean
                flag = ""
                if m in TRAINED[2:] or m == "pipeline" or m in VARIANTS:
                    # the bar: at most 1.05x the mean, and below it where pooled ridge is
                    # (by more than 1%)
                    bad = ratio > 1.05 or (best_pool < 0.99 * mean and ratio >= 1.0)
                    flag = " **x**" if bad else ""
                cells.append(f"{v:.4f} ({ratio:.2f}){flag}")
        for m in shown_before:
            v = b.get((r, m))
            cells.append("" if v is None else f"{v:.4f} ({v / mean:.2f})")
        lines.append("| " + " | ".join(cells) + " |")
    # the worst seed: each seed's RMSE over that seed's mean predictor's
    per = {(r["row"], r["seed"], r["model"]): r["rmse"] for r in results}
    worst_models = [m for m in [*TRAINED, *VARIANTS] if m != "pipeline-ridgecv-default"
                    and any((r, m) in a for r in rows)]
    lines += ["", "Worst seed (RMSE / the same seed's mean predictor's):", "",
              "| row | " + " | ".join(worst_models) + " |", "|" + " --- |" * (1 + len(worst_models))]
    for r in rows:
        cells = [r]
        for m in worst_models:
            ratios = [per[r, sd, m] / per[r, sd, "mean"] for sd in sorted(seeds_of[r])
                      if (r, sd, m) in per and (r, sd, "mean") in per]
            cells.append(f"{max(ratios):.2f}" if ratios else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _load_results(paths, seeds=None):
    """The results of ``--out`` JSON files, or of the lines runs printed (logs, complete or
    not), pooled (``paths`` comma-joined: one run split over processes); a row's seed counts when
    every model finished it; restricted to ``seeds`` when given."""
    res = []
    for path in paths.split(","):
        part = []
        if path.endswith(".json"):
            with open(path) as fh:
                part = json.load(fh)["results"]
        else:
            part = _parse_log(path)
        # a run goes through the models in MODELS' order: a row's seed is complete when its
        # last model finished (DeepSetsRegressor in every run of the default models; a variant
        # in a run of the mean and that variant)
        last = {r: SERIES_MODELS[-1] if r in SERIES_ROWS else "DeepSetsRegressor" for r in ROWS}
        done = {(r["row"], r["seed"]) for r in part
                if r["model"] == last[r["row"]] or r["model"] in VARIANTS}
        if path.endswith(".json"):  # a finished run
            done = {(r["row"], r["seed"]) for r in part}
        res += [r for r in part if (r["row"], r["seed"]) in done]
    seen, unique = set(), []
    for r in res:  # the first of repeated (row, seed, model) results
        if (r["row"], r["seed"], r["model"]) not in seen:
            seen.add((r["row"], r["seed"], r["model"]))
            unique.append(r)
    return [r for r in unique if seeds is None or r["seed"] in seeds]


def _parse_log(path):
    """The results in the lines a run printed."""
    res = []
    with open(path) as fh:
        for line in fh:
            parts = line.split()
            if len(parts) < 5 or parts[1] != "seed" or parts[0] not in ROWS:
                continue
            row, seed, name = parts[0], int(parts[2]), parts[3]
            keys = [name, "pipeline-ridgecv-default"] if name == "pipeline" else [name]
            for key, v in zip(keys, parts[4:]):
                res.append(dict(row=row, seed=seed, model=key, rmse=float(v)))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one seed, smaller rows")
    ap.add_argument("--rows", nargs="+", default=ROWS, choices=ROWS)
    ap.add_argument("--models", nargs="+", default=MODELS, choices=MODELS + list(VARIANTS))
    ap.add_argument("--seeds", type=int, nargs="+", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--asinh", action="store_true",
                    help="give the models arcsinh of every feature (heavy-tailed inputs)")
    ap.add_argument("--out", default=None, help="write the results (JSON) here")
    ap.add_argument("--src", default=None, help="import skset from this directory")
    ap.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                    help="print the table of these result files (the first: the rows and "
                         "baselines; the others' trained models are shown as 'before')")
    ap.add_argument("--before", default=None,
                    help="also run the trained models of the skset in this directory (a second "
                         "process, after this one) and show them beside")
    args = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    # the skset of --src, else the one of this checkout (not an installed copy)
    sys.path.insert(0, os.path.abspath(args.src) if args.src else os.path.dirname(here))
    sys.path.insert(1, here)
    seeds = args.seeds or ([0] if args.quick else [0, 1, 2])
    if args.merge:
        # comma-joined files are one run split over processes (their results pooled)
        loaded = [_load_results(path, seeds if args.seeds else None) for path in args.merge]
        rest = [r for res in loaded[1:] for r in res if r["model"] in TRAINED]
        print(table(loaded[0], rest or None))
        return
    import skset

    print(f"skset from {os.path.dirname(skset.__file__)}; rows {args.rows}; seeds {seeds}; "
          f"threads {args.threads}", flush=True)
    t0 = time.perf_counter()
    results = run(args.rows, seeds, args.models, args.quick, args.threads, args.asinh)
    before = None
    if args.before:
        tmp = (args.out or "regression") + ".before.json"
        cmd = [sys.executable, os.path.abspath(__file__), "--src", args.before, "--out", tmp,
               "--threads", str(args.threads), "--seeds", *map(str, seeds), "--rows", *args.rows,
               "--models", *[m for m in args.models if m in TRAINED and m != "pipeline-ridgecv-default"]]
        if args.quick:
            cmd.append("--quick")
        subprocess.run(cmd, check=True)
        with open(tmp) as fh:
            before = json.load(fh)["results"]
    print(f"total {time.perf_counter() - t0:.0f} s")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"argv": sys.argv, "results": results, "before": before}, fh, indent=1)
    print(table(results, before))


if __name__ == "__main__":
    main()
