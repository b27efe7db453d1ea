"""ABC benchmarks: circles (ARI), unseen digits (NMI, eigengap k), speed of batched clustering.

Run (2-core CPU; keep each command bounded)::

    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_abc.py circles --steps 1500 --save circles.pkl
    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_abc.py digits --steps 1500 --save digits.pkl
    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_abc.py circles --model circles.pkl --resume \
        --steps 4000 --train-seed 1 --save circles8000.pkl      # 4000 more steps, fresh instances
    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_abc.py speed --model circles.pkl
    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_abc.py profile --model circles.pkl  # where time goes
    python benchmarks/bench_abc.py circles --quick      # smoke run (seconds)

Each task trains ABC (unless ``--model`` loads a pickled one), evaluates it on fresh test
instances, and runs the scikit-learn baselines on the same instances in the same process.
"""

from __future__ import annotations

import argparse
import os
import pickle
import time
import warnings

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.cluster import KMeans, SpectralClustering  # noqa: E402
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score  # noqa: E402

from skset import ABCClusterer, EigengapSpectralClustering, estimate_n_clusters  # noqa: E402
from skset.datasets import (  # noqa: E402
    load_digits_split,
    make_circles_instances,
    sample_clustering_instances,
)

GAMMAS = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0)


def _mean(score, ys, labs):
    return float(np.mean([score(a, b) for a, b in zip(ys, labs, strict=True)]))


def _sc(X, k, gamma, seed=0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SpectralClustering(k, affinity="rbf", gamma=gamma, random_state=seed).fit_predict(X)


def _tune_gamma(Xs, ys, ks, score):
    res = {g: _mean(score, ys, [_sc(x, k, g) for x, k in zip(Xs, ks, strict=True)])
           for g in GAMMAS}
    best = max(res, key=res.get)
    return best, res


def _load(path):
    if str(path).endswith(".skset"):  # skset.save format (e.g. examples/data/abc_circles_20k.skset)
        import skset

        return skset.load(path)
    with open(path, "rb") as f:
        abc = pickle.load(f)
    if not hasattr(abc, "max_pairs"):  # pickled before the parameter existed
        abc.max_pairs = 10_000_000
    return abc


def _literal(text):
    import ast

    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a string such as rbf


def _train(args, X, y, **kw):
    if args.model:
        abc = _load(args.model)
        if not args.resume:
            return abc, float("nan")
        # continue training the loaded model for --steps more steps (warm start)
        n_before = abc.n_iter_
        abc.set_params(warm_start=True, max_steps=args.steps, verbose=args.verbose,
                       n_iter_no_change=args.patience, tol=args.tol)
        if args.lr != abc.learning_rate_init:
            # a new learning rate needs a fresh optimizer (a restored Adam state keeps the old one)
            abc.set_params(learning_rate_init=args.lr)
            abc._optimizer_state = None
        t0 = time.perf_counter()
        abc.fit(X, y)
        minutes = (time.perf_counter() - t0) / 60
        print(f"  resumed from {n_before} steps; {minutes:.1f} min for {args.steps} more")
        if args.save:
            with open(args.save, "wb") as f:
                pickle.dump(abc, f)
        return abc, minutes
    if args.defaults:  # the estimator's defaults: only the protocol's settings are passed
        abc = ABCClusterer(random_state=args.seed, verbose=args.verbose, **kw)
        if args.set:  # a candidate default: one or more parameters changed, the rest defaults
            abc.set_params(**{k: _literal(v) for k, v in (kv.split("=", 1) for kv in args.set)})
            print(f"  defaults except {args.set}")
        t0 = time.perf_counter()
        abc.fit(X, y)
        minutes = (time.perf_counter() - t0) / 60
        if args.save:
            with open(args.save, "wb") as f:
                pickle.dump(abc, f)
        return abc, minutes
    abc = ABCClusterer(args.compatibility, hidden_size=args.dim, n_layers=args.blocks,
                       n_heads=args.heads, compat_dim=args.compat_dim, max_steps=args.steps,
                       batch_size=args.batch_size, learning_rate_init=args.lr,
                       eval_every=args.eval_every, random_state=args.seed,
                       n_iter_no_change=args.patience, tol=args.tol,
                       verbose=args.verbose, input_similarity=args.input_similarity,
                       standardize=not args.no_standardize, alpha=args.weight_decay,
                       early_stopping=args.early_stopping,
                       class_weight=None if args.class_weight is None else tuple(args.class_weight),
                       **kw)
    t0 = time.perf_counter()
    abc.fit(X, y)
    minutes = (time.perf_counter() - t0) / 60
    if args.save:
        with open(args.save, "wb") as f:
            pickle.dump(abc, f)
    return abc, minutes


def circles_suite(args):
    """The paper's ablation: train on 2,000 instances of 2-5 circles, test on 200 (k unknown)."""
    X, y = make_circles_instances(args.train, args.points, n_circles=(2, 5), random_state=args.seed)
    Xt, yt = make_circles_instances(args.test, args.points, n_circles=(2, 5),
                                    random_state=args.seed + 1)
    abc, minutes = _train(args, X, y)
    kt = np.array([len(np.unique(v)) for v in yt])
    nmi = normalized_mutual_info_score
    pred_eg = abc.predict(Xt)
    k_eg = np.array([len(np.unique(p)) for p in pred_eg])
    abc_eg = _mean(nmi, yt, pred_eg)
    abc_true = _mean(nmi, yt, abc.predict(Xt, n_clusters=kt))
    print(f"circles 2-5: {len(X)} training instances, {args.test} test instances of {args.points} "
          f"points; defaults={args.defaults}; {abc.n_iter_} steps, {minutes:.1f} min training")
    print(f"  validation (mean eigengap ARI on held-out instances): kept "
          f"{getattr(abc, 'kernel_mix_', None)}, scores {getattr(abc, 'kernel_scores_', None)}; "
          f"learned kernel per check {[round(v, 3) for v in abc.validation_scores_]}")
    print(f"  prior: {getattr(abc, 'input_similarity_', None)} {getattr(abc, 'prior_params_', None)}"
          f"; candidates {getattr(abc, 'prior_scores_', None)}")
    print(f"  k rule: threshold {getattr(abc, 'eigen_threshold_', None)} (None: eigengap), k in "
          f"[{getattr(abc, '_min_k', lambda: None)()}, {abc._max_k()}], validation k right "
          f"{getattr(abc, 'validation_k_right_', float('nan')):.0%}; learning rates per check "
          f"{[float(f'{v:.2g}') for v in abc.learning_rates_]}")
    print(f"  training BCE per {abc.eval_every} steps: {[round(v, 3) for v in abc.loss_curve_]}")
    print(f"  ABC mean NMI, estimated k: {abc_eg:.3f}  (k right {np.mean(k_eg == kt):.0%}, mean k "
          f"{k_eg.mean():.1f}, estimated - true k: "
          f"{dict(zip(*np.unique(k_eg - kt, return_counts=True)))})")
    print(f"  ABC mean NMI, true k:     {abc_true:.3f}", flush=True)
    if args.no_baselines:
        return
    eg = [EigengapSpectralClustering(affinity="nearest_neighbors", n_neighbors=10,
                                     max_clusters=10, random_state=0).fit(x) for x in Xt]
    print(f"  untrained kNN-10 graph + eigengap (k <= 10): {_mean(nmi, yt, [e.labels_ for e in eg]):.3f}"
          f"  (k right {np.mean(np.array([e.n_clusters_ for e in eg]) == kt):.0%})")
    sc = [SpectralClustering(k, affinity="nearest_neighbors", n_neighbors=10, random_state=0)
          .fit_predict(x) for x, k in zip(Xt, kt, strict=True)]
    print(f"  untrained kNN-10 spectral, true k: {_mean(nmi, yt, sc):.3f}", flush=True)


def circles(args):
    n_train = args.steps * args.batch_size if (not args.model or args.resume) else 0
    # training instances: seed --seed (test and tuning sets use --seed + 1, + 2), or
    # 1000 + --train-seed for the fresh instances of a resumed run
    train_seed = args.seed if args.train_seed is None else 1000 + args.train_seed
    X, y = make_circles_instances(n_train, args.points, random_state=train_seed)
    Xt, yt = make_circles_instances(args.test, args.points, random_state=args.seed + 1)
    Xv, yv = make_circles_instances(args.test, args.points, random_state=args.seed + 2)
    abc, minutes = _train(args, X, y, instance_n_clusters=4)
    k4 = [4] * len(Xt)
    abc_true = _mean(adjusted_rand_score, yt, abc.predict(Xt, n_clusters=4))
    pred_eg = abc.predict(Xt)
    abc_eg = _mean(adjusted_rand_score, yt, pred_eg)
    k_eg = np.array([len(np.unique(p)) for p in pred_eg])
    gamma, table = _tune_gamma(Xv, yv, k4, adjusted_rand_score)  # tuned on separate instances
    sc = _mean(adjusted_rand_score, yt, [_sc(x, 4, gamma) for x in Xt])
    km = _mean(adjusted_rand_score, yt, [KMeans(4, n_init=10, random_state=0).fit_predict(x)
                                         for x in Xt])
    print(f"circles: {args.test} test instances of {args.points} points, 4 circles")
    print(f"  ABC ({args.compatibility}, dim={args.dim}, {args.blocks} SABs): {abc.n_iter_} steps "
          f"x {args.batch_size} instances, {minutes:.1f} min training")
    print(f"  ABC mean ARI, true k=4:       {abc_true:.3f}")
    print(f"  ABC mean ARI, eigengap k:     {abc_eg:.3f}  (k=4 found in "
          f"{np.mean(k_eg == 4):.0%}, median k {np.median(k_eg):.0f})")
    print(f"  SpectralClustering rbf k=4, gamma={gamma} (tuned on {args.test} other "
          f"instances; grid {table}): {sc:.3f}")
    print(f"  KMeans k=4:                   {km:.3f}")


def digits(args):
    b = load_digits_split(augment=args.augment)
    Xt, yt = sample_clustering_instances(b.X_unseen, b.y_unseen, args.test, args.points, (2, 4),
                                         random_state=args.seed + 1)
    b0 = load_digits_split()  # the baseline's gamma is tuned on the plain seen digits
    Xv, yv = sample_clustering_instances(b0.X_seen, b0.y_seen, 100, args.points, (2, 4),
                                         random_state=args.seed + 2)
    abc, minutes = _train(args, b.X_seen, b.y_seen, instance_size=args.points,
                          instance_n_clusters=(args.kmin, args.kmax))
    if not args.defaults:
        abc.set_params(max_clusters=args.max_clusters)
    kt = np.array([len(np.unique(v)) for v in yt])
    nmi = normalized_mutual_info_score
    abc_true = _mean(nmi, yt, abc.predict(Xt, n_clusters=kt))
    pred_eg = abc.predict(Xt)
    abc_eg = _mean(nmi, yt, pred_eg)
    k_eg = np.array([len(np.unique(p)) for p in pred_eg])
    prm = abc.get_params()
    print(f"digits: train on 0-5 (augment={args.augment}: {len(np.unique(b.y_seen))} classes), "
          f"defaults={args.defaults}, input_similarity={prm['input_similarity']}, "
          f"lr={prm['learning_rate_init']}, early_stopping={prm['early_stopping']} (held-out "
          f"classes {getattr(abc, 'validation_classes_', None)}), max_clusters used "
          f"{abc._max_k()}")
    print(f"  prior: {getattr(abc, 'input_similarity_', None)} {getattr(abc, 'prior_params_', None)}"
          f"; candidates {getattr(abc, 'prior_scores_', None)}")
    print(f"  k rule: threshold {getattr(abc, 'eigen_threshold_', None)} (None: eigengap), k in "
          f"[{getattr(abc, '_min_k', lambda: None)()}, {abc._max_k()}], calibration k right "
          f"{getattr(abc, 'validation_k_right_', float('nan')):.0%}")
    if prm["early_stopping"]:
        print(f"  validation (mean eigengap ARI, held-out classes): kept "
              f"{getattr(abc, 'kernel_mix_', None)}, scores {getattr(abc, 'kernel_scores_', None)}"
              f"; learned kernel per check {[round(v, 3) for v in abc.validation_scores_]}")
    print(f"  ABC ({prm['compatibility']}, dim={prm['hidden_size']}, {prm['n_layers']} SABs): "
          f"{abc.n_iter_} steps x {prm['batch_size']} instances, {minutes:.1f} min training")
    print(f"  ABC mean NMI, true k:         {abc_true:.3f}")
    print(f"  ABC mean NMI, eigengap k:     {abc_eg:.3f}  (true k found in "
          f"{np.mean(k_eg == kt):.0%}, k <= {abc._max_k()}; eigengap k - true k: "
          f"{dict(zip(*np.unique(k_eg - kt, return_counts=True)))})", flush=True)
    print(f"  training BCE per {abc.eval_every} steps: "
          f"{[round(v, 4) for v in abc.loss_curve_[::max(1, len(abc.loss_curve_) // 8)]]}")
    if args.no_baselines:
        return
    kv = [len(np.unique(v)) for v in yv]
    gamma, table = _tune_gamma(Xv, yv, kv, nmi)  # tuned on seen classes
    sc_true = _mean(nmi, yt, [_sc(x, k, gamma) for x, k in zip(Xt, kt, strict=True)])
    eg = [EigengapSpectralClustering(affinity="rbf", gamma=gamma, max_clusters=10,
                                     random_state=0).fit(x) for x in Xt]
    sc_eg = _mean(nmi, yt, [e.labels_ for e in eg])
    sc_k = np.array([e.n_clusters_ for e in eg])
    print(f"  test: {args.test} instances of {args.points} images of 6-9, k in [2, 4]; "
          f"training instances of {args.points}, k in [{args.kmin}, {args.kmax}]")
    print(f"  SpectralClustering rbf true k (gamma={gamma}, tuned on seen classes; grid "
          f"{table}): {sc_true:.3f}")
    print(f"  EigengapSpectralClustering rbf (k <= 10): {sc_eg:.3f}  (true k found in "
          f"{np.mean(sc_k == kt):.0%})")


def priors(args):
    """The fixed priors alone (no training): spectral clustering with the true k of the unseen
    digits 6-9 and of seen digits 0-5 (which ``input_similarity="auto"`` can validate on), for
    each candidate of ``"auto"``: where the choice of the prior matters and whether seen classes
    rank the priors as unseen ones do."""
    from skset.nn.abc import ABCKernel, abc_affinity
    from skset.nn.spectral import spectral_cluster

    b = load_digits_split()
    Xt, yt = sample_clustering_instances(b.X_unseen, b.y_unseen, args.test, args.points, (2, 4),
                                         random_state=args.seed + 1)
    Xs, ys = sample_clustering_instances(b.X_seen, b.y_seen, args.test, args.points, (2, 4),
                                         random_state=args.seed + 2)

    def score(X, Y, sim, k, scale, offset):
        x = torch.tensor(np.stack(X), dtype=torch.float32)
        x = x - x.mean((0, 1))  # priors are invariant to one global scale
        A = abc_affinity(scale * (ABCKernel(x.shape[-1], input_similarity=sim, n_neighbors=k)
                                  .input_prior(x) + offset))
        kt = torch.tensor([len(np.unique(v)) for v in Y])
        lab = spectral_cluster(A, None, kt, generator=torch.Generator().manual_seed(0))[0]
        return _mean(normalized_mutual_info_score, Y, [r.numpy() for r in lab])

    cands = ABCClusterer(n_neighbors=10)._prior_candidates()
    print(f"priors alone, true k, {args.test} instances of {args.points} images, k in [2, 4]")
    print("| prior | NMI unseen 6-9 | NMI seen 0-5 |\n|---|---:|---:|")
    for sim, k, scale, offset in cands:
        name = f"knn({k})" if sim == "knn" else f"rbf(scale={scale:g}, offset={offset:g})"
        print(f"| {name} | {score(Xt, yt, sim, k, scale, offset):.3f} | "
              f"{score(Xs, ys, sim, k, scale, offset):.3f} |", flush=True)


def step(args):
    """Seconds per 100 training steps of the default model (8 instances of 100 circles points,
    no validation), with ``--threads`` torch threads (set ``OMP_WAIT_POLICY`` outside)."""
    X, y = make_circles_instances(400, args.points, n_circles=(2, 5), random_state=args.seed)
    abc = ABCClusterer(max_steps=300, early_stopping=False, random_state=args.seed)
    t0 = time.perf_counter()
    abc.fit(X, y)
    print(f"{args.threads} thread(s), OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}: "
          f"{(time.perf_counter() - t0) / 3:.2f} s per 100 steps of {abc.batch_size} instances")


def speed(args):
    X, _ = make_circles_instances(args.test, args.points, random_state=args.seed + 3)
    if args.model:
        abc = _load(args.model)
    else:
        Xtr, ytr = make_circles_instances(64, args.points, random_state=args.seed)
        abc = ABCClusterer(hidden_size=args.dim, max_steps=20, batch_size=16, random_state=0).fit(Xtr,
                                                                                           ytr)
    abc.predict(X[:50])  # warm up

    def timed(fn, repeat):
        ts, out = [], None
        for _ in range(repeat):
            t0 = time.perf_counter()
            out = fn()
            ts.append(time.perf_counter() - t0)
        return float(np.median(ts)), out

    r = args.repeat
    t_ours, labels = timed(lambda: abc.predict(X), r)
    t_aff, A = timed(lambda: abc.affinity(X), r)
    # the previous code path, for reference: one batch of all instances on all intra-op threads
    import skset.cluster._abc_predict as skc  # where predict reads the chunk size

    chunk = skc.CPU_CHUNK_PAIRS
    skc.CPU_CHUNK_PAIRS = abc.max_pairs
    try:
        t_one, _ = timed(lambda: abc.predict(X), r)
    finally:
        skc.CPU_CHUNK_PAIRS = chunk
    ks = [len(np.unique(lab)) for lab in labels]
    t_eg, k_eg = timed(lambda: estimate_n_clusters(A), r)

    def sk_loop():
        ref = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for a, k in zip(A, ks, strict=True):
                ref.append(SpectralClustering(k, affinity="precomputed",
                                              random_state=0).fit_predict(a))
        return ref

    t_sk, ref = timed(sk_loop, r)
    agree = _mean(adjusted_rand_score, ref, labels)
    print(f"speed: {args.test} instances of {args.points} points, torch threads "
          f"{torch.get_num_threads()}, medians of {r} runs")
    print(f"  ABC predict (affinity + eigengap + embedding + k-means, chunked over the threads): "
          f"{t_ours:.2f} s")
    print(f"  ABC predict as one batch on all threads (the previous path): {t_one:.2f} s")
    print(f"  ABC affinity alone (as float64 numpy matrices): {t_aff:.2f} s; the float64 "
          f"estimate_n_clusters on those affinities: {t_eg:.2f} s")
    print(f"  loop of SpectralClustering(affinity='precomputed') with the same k (affinity time "
          f"not counted): {t_sk:.2f} s")
    print(f"  speed-up: {t_sk / t_ours:.1f}x (one-batch path {t_sk / t_one:.1f}x); k from "
          f"estimate_n_clusters agrees with predict's k in "
          f"{np.mean(np.asarray(k_eg) == np.asarray(ks)):.0%}; mean ARI between the two "
          f"labelings {agree:.3f}")


def profile(args):
    """Where predict's time goes on a CPU: eigh threading, forward chunk size, chunk budget."""
    from concurrent.futures import ThreadPoolExecutor

    import skset.cluster._abc_predict as skc  # where predict reads the chunk size
    from skset._sets import pack
    from skset.nn.abc import abc_affinity
    from skset.nn.spectral import normalized_laplacian

    X, _ = make_circles_instances(args.test, args.points, random_state=args.seed + 3)
    abc = _load(args.model)
    abc.predict(X[:50])
    n = torch.get_num_threads()

    def med(fn, repeat=args.repeat):
        ts = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return float(np.median(ts))

    Xb, Mb = pack(abc._scale(X))
    m = abc.module_.eval()
    with torch.no_grad():
        L = normalized_laplacian(abc_affinity(m(Xb, Mb), Mb), Mb)
    print(f"profile: {args.test} instances of {args.points} points, medians of {args.repeat}")
    pool = ThreadPoolExecutor(n, initializer=torch.set_num_threads, initargs=(1,))
    for dt in (torch.float32, torch.float64):
        Ld = L.to(dt)
        row = {}
        for th in sorted({1, n}):
            torch.set_num_threads(th)
            row[f"one call, {th} thread(s)"] = med(lambda Ld=Ld: torch.linalg.eigh(Ld))
        torch.set_num_threads(n)
        row[f"{n} chunks on {n} Python threads x 1"] = med(
            lambda Ld=Ld: list(pool.map(torch.linalg.eigh, Ld.chunk(n))))
        torch.set_num_threads(n)
        print(f"  batched eigh of the Laplacians, {dt}: "
              + ", ".join(f"{k} {v:.2f} s" for k, v in row.items()))
    with torch.no_grad():
        row = {c: med(lambda c=c: [m(a, b) for a, b in zip(Xb.split(c), Mb.split(c),
                                                             strict=True)])
               for c in (len(X), 250, 100, 50, 25)}
    print(f"  network forward ({n} threads), instances per call: "
          + ", ".join(f"{c}: {v:.2f} s" for c, v in row.items()))
    chunk = skc.CPU_CHUNK_PAIRS
    try:
        row = {}
        for sh in range(15, 21):
            skc.CPU_CHUNK_PAIRS = 1 << sh
            row[sh] = med(lambda: abc.predict(X))
    finally:
        skc.CPU_CHUNK_PAIRS = chunk
    print("  predict, CPU chunk budget (padded pairs): "
          + ", ".join(f"2^{sh}: {v:.2f} s" for sh, v in row.items()))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", choices=["circles", "circles-suite", "digits", "priors", "step", "speed",
                                      "profile"])
    p.add_argument("--defaults", action="store_true",
                   help="circles-suite/digits: ABCClusterer with its defaults (protocol settings "
                        "only)")
    p.add_argument("--set", nargs="*", default=None, metavar="PARAM=VALUE",
                   help="with --defaults: change these parameters (a candidate default)")
    p.add_argument("--train", type=int, default=2000, help="circles-suite: training instances")
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--blocks", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--compat-dim", type=int, default=None)
    p.add_argument("--compatibility", default="multiplicative")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--patience", type=int, default=10,
                   help="n_iter_no_change, in blocks of --eval-every steps")
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--points", type=int, default=100)
    p.add_argument("--test", type=int, default=None)
    p.add_argument("--kmin", type=int, default=2)
    p.add_argument("--kmax", type=int, default=6)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0, help="seed of the test/tuning instances")
    p.add_argument("--train-seed", type=int, default=None,
                   help="seed of the training instances (circles; default --seed)")
    p.add_argument("--model", default=None, help="load a pickled ABCClusterer instead of training")
    p.add_argument("--save", default=None, help="pickle the trained ABCClusterer here")
    p.add_argument("--resume", action="store_true",
                   help="with --model: train the loaded model for --steps more steps")
    p.add_argument("--verbose", type=int, default=0)
    p.add_argument("--augment", default=None, choices=[None, "rot4", "dihedral"],
                   help="digits: pseudo-classes from rotations/mirrors of the seen digits")
    p.add_argument("--input-similarity", default=None, choices=[None, "rbf", "cosine"])
    p.add_argument("--no-standardize", action="store_true")
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--early-stopping", action="store_true",
                   help="validation on held-out elements of the seen classes")
    p.add_argument("--max-clusters", type=int, default=None,
                   help="digits: largest k of ABC's eigengap (the rbf baseline uses 10)")
    p.add_argument("--class-weight", type=float, nargs=2, default=None,
                   metavar=("W_NEG", "W_POS"), help="BCE weights of negative / positive pairs")
    p.add_argument("--no-baselines", action="store_true", help="digits: ABC only")
    p.add_argument("--repeat", type=int, default=3, help="speed: timed runs (median)")
    p.add_argument("--quick", action="store_true", help="tiny smoke run")
    args = p.parse_args()
    if args.test is None:
        args.test = {"circles": 100, "circles-suite": 200, "digits": 200, "priors": 200,
                     "step": 0, "speed": 1000, "profile": 1000}[args.task]
    if args.quick:
        args.steps, args.dim, args.test, args.eval_every = 10, 32, 10, 5
    torch.set_num_threads(args.threads)
    {"circles": circles, "circles-suite": circles_suite, "digits": digits, "speed": speed,
     "profile": profile, "priors": priors, "step": step}[args.task](args)


if __name__ == "__main__":
    main()
