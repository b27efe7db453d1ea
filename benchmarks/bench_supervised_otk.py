"""Supervised end-to-end OTK (OTKClassifier): accuracy and training speed.

(a) JapaneseVowels: OTKClassifier against the unsupervised pipeline
    NystromFeatures -> OTKEmbedding -> LogisticRegression with the same embedding size, over seeds.
(b) make_motif_order (the order of two motifs decides the class): OTKClassifier with
    position_sigma against the same model with mean pooling (n_supports=1), without positions,
    and the SetTransformerClassifier (raw elements, and with a relative-position feature), same
    number of epochs; accuracy and training time.
(c) Speed: training epoch on 2,000 sequences of lengths 100..1,000 (k-mer width 10, 128 anchors,
    1 x 64 supports, 10 Sinkhorn iterations): OTKClassifier's epoch (length-bucketed batches)
    against the same model written naively here (padded to the longest, random batches).

Run: OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_supervised_otk.py [--quick] [--parts abc]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
import warnings

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402

from skset import NystromFeatures, OTKClassifier, OTKEmbedding  # noqa: E402
from skset.datasets import load_japanese_vowels, make_motif_order  # noqa: E402

warnings.filterwarnings("ignore", category=Warning, module="skset")
warnings.filterwarnings("ignore", message=".*maximum iterations.*")


def part_a(seeds, max_iter):
    Xtr, ytr = load_japanese_vowels(subset="train", return_X_y=True)
    Xte, yte = load_japanese_vowels(subset="test", return_X_y=True)
    rows = []
    for s in seeds:
        t = time.perf_counter()
        pipe = Pipeline([("nystrom", NystromFeatures(128, bandwidth=0.6, random_state=s)),
                         ("otk", OTKEmbedding(10, random_state=s)),
                         ("clf", LogisticRegression(max_iter=5000))]).fit(Xtr, ytr)
        t_u = time.perf_counter() - t
        acc_u = pipe.score(Xte, yte)
        t = time.perf_counter()
        # alpha = 1 / n matches LogisticRegression's default C=1 on the same features
        clf = OTKClassifier(128, bandwidth=0.6, n_supports=10, alpha=1 / len(Xtr),
                            max_iter=max_iter, random_state=s).fit(Xtr, ytr)
        t_s = time.perf_counter() - t
        acc_s = clf.score(Xte, yte)
        rows.append((s, acc_u, acc_s, t_u, t_s, clf.n_iter_))
        print(f"  seed {s}: unsupervised {acc_u:.4f} ({t_u:.1f} s), supervised {acc_s:.4f} "
              f"({t_s:.1f} s, {clf.n_iter_} epochs)", flush=True)
    r = np.array([x[1:] for x in rows])
    lines = ["| model (embedding 1 x 10 x 128 = 1280) | test accuracy, mean +- std | fit time (s, "
             "median) |", "|---|---|---|",
             f"| unsupervised: NystromFeatures -> OTKEmbedding -> LogisticRegression | "
             f"{100 * r[:, 0].mean():.2f} +- {100 * r[:, 0].std():.2f} | "
             f"{np.median(r[:, 2]):.1f} |",
             f"| supervised: OTKClassifier (alternating, max_iter={max_iter}) | "
             f"{100 * r[:, 1].mean():.2f} +- {100 * r[:, 1].std():.2f} | "
             f"{np.median(r[:, 3]):.1f} |",
             "", "per seed (unsupervised / supervised): " + ", ".join(
                 f"{x[0]}: {100 * x[1]:.2f} / {100 * x[2]:.2f}" for x in rows)]
    return "\n".join(lines)


def _with_position(X):
    return [np.hstack([x, (np.arange(len(x)) / len(x))[:, None].astype(x.dtype)]) for x in X]


def part_b(seeds, n_train, max_iter):
    from skset import SetTransformerClassifier

    results = {}
    for s in seeds:
        X, y = make_motif_order(n_samples=2 * n_train, min_length=150, max_length=300,
                                motif_length=6, mutation_rate=0.1, random_state=100 + s)
        Xtr, ytr, Xte, yte = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
        # the paper's supervised setting: plain k-mers, positions only where named
        common = dict(n_components=32, window=6, kmer_coding="plain", max_iter=max_iter,
                      random_state=s)
        models = {
            "OTKClassifier, 1 x 8 supports, position_sigma=0.3":
                (OTKClassifier(n_supports=8, position_sigma=0.3, **common), False),
            "OTKClassifier, 1 x 8 supports, no positions":
                (OTKClassifier(n_supports=8, position_sigma=None, **common), False),
            "mean pooling (OTKClassifier, 1 support = supervised CKN)":
                (OTKClassifier(n_supports=1, position_sigma=None, **common), False),
            "SetTransformerClassifier (raw elements)":
                (SetTransformerClassifier(max_iter=max_iter, random_state=s), False),
            "SetTransformerClassifier (+ relative position feature i/n)":
                (SetTransformerClassifier(max_iter=max_iter, random_state=s), True),
        }
        for name, (model, pos) in models.items():
            A, B = (_with_position(Xtr), _with_position(Xte)) if pos else (Xtr, Xte)
            t = time.perf_counter()
            model.fit(A, ytr)
            dt = time.perf_counter() - t
            acc = model.score(B, yte)
            results.setdefault(name, []).append((acc, dt))
            print(f"  seed {s} {name}: {acc:.3f} ({dt:.1f} s)", flush=True)
    lines = [f"| model ({max_iter} epochs each, {n_train} train / {n_train} test sequences) | "
             "test accuracy, mean +- std | fit time (s, median) |", "|---|---|---|"]
    for name, r in results.items():
        r = np.array(r)
        lines.append(f"| {name} | {100 * r[:, 0].mean():.1f} +- {100 * r[:, 0].std():.1f} | "
                     f"{np.median(r[:, 1]):.1f} |")
    return "\n".join(lines)


# -- (c) the same model written naively: pad everything to the longest, no bucketing --
def naive_forward(X, M, anchors, bandwidth, refs, epsilon, n_iter, weight, bias, center, window,
                  mean, scale):
    """Nystrom on k-mers -> log-domain Sinkhorn -> pooling -> normalise -> linear, plain code."""
    X = (X - mean) / scale
    B, n, d = X.shape
    xw = X.unfold(1, window, 1).transpose(2, 3).reshape(B, n - window + 1, window * d)
    mw = M[:, window - 1:]
    norms = xw.norm(dim=-1, keepdim=True)
    xw = xw / norms.clamp_min(1e-12)
    w = anchors / anchors.norm(dim=-1, keepdim=True)
    kxw = torch.exp((xw @ w.T - 1) / bandwidth**2)
    Kww = torch.exp((w @ w.T - 1) / bandwidth**2).double()
    ev, U = torch.linalg.eigh(Kww)
    ev = ev.clamp_min(1e-4 * ev.max())
    feats = (kxw @ ((U * ev.rsqrt()) @ U.T).to(X.dtype)) * mw.unsqueeze(-1)
    feats = feats * norms  # NystromFeatures(keep_norm=True), the default since the first run
    z = refs[0]
    p = z.shape[0]
    C = feats @ z.T / epsilon  # (B, n', p)
    C = C.masked_fill(~mw.unsqueeze(-1), -math.inf)
    log_a = -torch.log(mw.sum(1, keepdim=True).to(X.dtype)).unsqueeze(-1)
    f = torch.zeros_like(C[:, :, :1])
    g = torch.zeros_like(C[:, :1, :])
    for _ in range(n_iter):
        f = log_a - torch.logsumexp(C + g, dim=2, keepdim=True)
        f = f.masked_fill(~mw.unsqueeze(-1), -math.inf)
        g = -math.log(p) - torch.logsumexp(C + f, dim=1, keepdim=True)
    P = torch.exp(C + f + g)
    emb = (math.sqrt(p) * P.transpose(1, 2) @ feats).flatten(1) - center
    emb = emb * math.sqrt(emb.shape[1]) / emb.norm(dim=1, keepdim=True)
    return emb @ weight.T + bias


def part_c(n_seq, max_steps, threads):
    from skset._sets import pack

    rng = np.random.default_rng(0)
    lengths = rng.integers(100, 1001, size=n_seq)
    X = [np.eye(4, dtype=np.float32)[rng.integers(4, size=n)] for n in lengths]
    y = rng.integers(0, 2, size=n_seq)
    # the map the naive model writes out: plain 10-mers on the sphere, their norm kept (explicit:
    # with "auto" the fit may choose another map, and the two models would compute different things)
    kw = dict(n_components=128, window=10, kmer_coding="plain", position_sigma=None,
              normalize=True, keep_norm=True, n_supports=64, n_references=1, epsilon=0.5,
              sinkhorn_iter=10, batch_size=64, solver="adam", learning_rate="constant",
              random_state=0, device="cpu", warm_start=True)
    # initialise on a subset (the unsupervised fit is not what we time), then time epochs
    clf = OTKClassifier(**{**kw, "max_iter": 1})
    sub = rng.choice(n_seq, 200, replace=False)
    clf.fit([X[i] for i in sub], y[sub])
    m = clf.module_
    params = [m.nystrom.anchors, m.otk.references, m.head.weight, m.head.bias]
    out = {}

    # (1) the estimator's epoch: length-bucketed batches (max_steps: time the first steps only)
    if max_steps is None:
        t = time.perf_counter()
        clf.set_params(max_iter=1).fit(X, y)
        out["OTKClassifier epoch (length-bucketed)"] = (n_seq, time.perf_counter() - t, None)
    else:
        from skset._sets import length_batches

        order = length_batches(lengths, max_elements=clf.max_elements, max_sets=64)
        steps = [order[i] for i in np.linspace(0, len(order) - 1, max_steps).astype(int)]
        opt = torch.optim.Adam(params, lr=1e-3)
        t = time.perf_counter()
        n_done = 0
        for idx in steps:
            Xb, Mb = pack([X[i] for i in idx])
            loss = F.cross_entropy(m(Xb, Mb), torch.as_tensor(y[idx]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            n_done += len(idx)
        out["OTKClassifier steps (length-bucketed)"] = (n_done, time.perf_counter() - t,
                                                        len(order))

    # (2) the same layers, padded to the longest, random batches of 64 (no bucketing)
    # (3) the naive script model: padded to the longest, log-domain Sinkhorn, no bucketing
    perm = rng.permutation(n_seq)
    batches = [perm[i:i + 64] for i in range(0, n_seq, 64)]
    if max_steps is not None:
        batches = batches[:max_steps]
    n_max = int(lengths.max())
    center = m.center
    naive_params = [p.detach().clone().requires_grad_() for p in params]
    # same model: the naive forward and the module agree on a batch
    Xb, Mb = pack([X[i] for i in batches[0][:4]], n_max=n_max)
    with torch.no_grad():
        a = m(Xb, Mb)
        b = naive_forward(Xb, Mb, naive_params[0], m.nystrom.bandwidth, naive_params[1], 0.5, 10,
                          naive_params[2], naive_params[3], center, 10, m.nystrom.mean,
                          m.nystrom.scale)
    agree = float((a - b).abs().max() / a.abs().max())
    for name, fwd, ps in [
        ("same layers, padded to the longest (no bucketing)", lambda Xb_, Mb_: m(Xb_, Mb_),
         params),
        ("naive script model, padded to the longest (no bucketing)",
         lambda Xb_, Mb_: naive_forward(Xb_, Mb_, naive_params[0], m.nystrom.bandwidth,
                                        naive_params[1], 0.5, 10, naive_params[2],
                                        naive_params[3], center, 10, m.nystrom.mean,
                                        m.nystrom.scale), naive_params),
    ]:
        opt = torch.optim.Adam(ps, lr=1e-3)
        t = time.perf_counter()
        n_done = 0
        for idx in batches:
            Xb, Mb = pack([X[i] for i in idx], n_max=n_max)
            loss = F.cross_entropy(fwd(Xb, Mb), torch.as_tensor(y[idx]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            n_done += len(idx)
        out[name] = (n_done, time.perf_counter() - t, None)
    real = int(lengths.sum())
    lines = [f"{n_seq} one-hot sequences (alphabet 4), lengths uniform in 100..1000 "
             f"({real} elements; padded to the longest: {n_seq * n_max}, "
             f"{n_seq * n_max / real:.2f}x), k-mer width 10, 128 anchors, 1 x 64 supports, "
             f"epsilon 0.5, 10 Sinkhorn iterations, batches of <= 64 sets, float32, "
             f"{threads} torch threads. Naive forward vs module on one batch: max relative "
             f"difference {agree:.1e}.", "",
             "| training scheme | sets timed | seconds | sets / second | vs naive |",
             "|---|---|---|---|---|"]
    rates = {k: v[0] / v[1] for k, v in out.items()}
    naive_rate = rates["naive script model, padded to the longest (no bucketing)"]
    for k, (n_done, sec, _) in out.items():
        lines.append(f"| {k} | {n_done} | {sec:.1f} | {rates[k]:.1f} | "
                     f"{rates[k] / naive_rate:.2f}x |")
    if max_steps is not None:
        bucketed = rates["OTKClassifier steps (length-bucketed)"]
        lines.append("")
        lines.append(f"(--speed-steps {max_steps}: {max_steps} training steps of each scheme "
                     "timed; the bucketed steps are spread evenly over the length-sorted "
                     "batches so that they see the same length mix as a full epoch; a full epoch "
                     f"of {n_seq} sets would take about {n_seq / max(bucketed, 1e-9):.0f} s "
                     "with bucketing.)")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 seeds, fewer epochs, smaller data")
    ap.add_argument("--parts", default="abc")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--speed-steps", type=int, default=None,
                    help="time this many training steps per scheme instead of full epochs")
    ap.add_argument("--out", default=None, help="write the markdown here")
    ap.add_argument("--seeds", type=int, nargs="+", default=None,
                    help="the seeds of part (b) (default: 0 1 2; 0 1 with --quick)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    seeds = [0, 1] if args.quick else [0, 1, 2, 3, 4]
    md = [f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores "
          f"(shared), torch {torch.__version__}, {args.threads} threads; "
          f"date {time.strftime('%Y-%m-%d')}"]
    if "a" in args.parts:
        print("(a) JapaneseVowels", flush=True)
        md += ["", "### (a) JapaneseVowels: supervised vs unsupervised, same embedding size", "",
               part_a(seeds, 10 if args.quick else 30)]
    if "b" in args.parts:
        print("(b) motif order", flush=True)
        md += ["", "### (b) make_motif_order: positions matter", "",
               part_b(args.seeds or seeds[:3], 150 if args.quick else 300,
                      5 if args.quick else 15)]
    if "c" in args.parts:
        print("(c) speed", flush=True)
        md += ["", "### (c) speed: training on 2,000 sequences of lengths 100..1,000", "",
               part_c(300 if args.quick else 2000, args.speed_steps, args.threads)]
    text = "\n".join(md)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
