"""Speed against peers at their best: OTK transform vs POT / ott-jax / plain torch, Nystrom vs
scikit-learn, all timed side by side in one run with the machine's matmul rate.

Rules of this harness (issue 14), so that its table is what a user would see:

* nothing else runs while timing: no memory probe, no profiler, no tracer; memory is measured by
  ``bench_otk_transform.py`` in separate calls;
* every peer computes the same thing (similarity ``<x, z>`` to one reference of ``p`` supports, an
  entropic plan with exactly ``iters`` iterations at ``epsilon``, the pooling ``sqrt(p) P^T x``),
  from the same list of numpy sets to the same ``(n_sets, p * d)`` float32 array, and its result is
  checked against skset's;
* every peer runs in its best configuration, chosen in a calibration round: POT
  (``ot.solve_batch`` on the torch backend, uniform weights, the whole equal-size group in one call
  or the chunk size that is fastest; for variable sizes also one call per set and padded length
  buckets with zero-mass padding), ott-jax (jit + vmap, compile time excluded) when it is
  installed, and a plain torch kernel-domain Sinkhorn written here (stack, bmm, no checks);
* the timed rounds interleave all methods and the 2048^2 float32 matmul (medians), so the
  "fraction of matmul" compares with the matmul rate of the same minutes.

Cases: S1 = 512 sets x 100 elements x 128 features, S3 = 512 sets of 50..1000 elements x 128
features; 64 supports, epsilon 0.5, 10 iterations. Nystrom: ``NystromFeatures.transform`` against
scikit-learn ``Nystroem(kernel="rbf").transform`` of the pooled elements (same number of anchors,
features and gamma: equal work; scikit-learn is given skset's anchors and normalisation;
``bench_nystrom_transform.py`` also pins both to the same threads).

Run::

    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_peers.py --out benchmarks/results/peers.md
    python benchmarks/bench_peers.py --quick        # smoke run
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import argparse  # noqa: E402
import datetime  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _timing import interleaved  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402
from skset._sets import length_batches, pack  # noqa: E402

P_SUPPORTS, EPS, ITERS, DIM = 64, 0.5, 10, 128
BOUND = "bound: the similarity and pooling matmuls alone (no Sinkhorn, no checks)"


def make_sets(rng, lengths, d, n_clusters=16):
    """Unit-norm elements around a few random directions (the scale of Nystrom features)."""
    centers = rng.standard_normal((n_clusters, d)).astype(np.float32)
    out = []
    for n in lengths:
        x = centers[rng.integers(n_clusters, size=n)] + 0.7 * rng.standard_normal(
            (n, d)).astype(np.float32)
        out.append((x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32))
    return out


def best_of(candidates: dict, rounds: int = 2):
    """Calibration: the fastest of a peer's configurations (name, seconds of each)."""
    t = interleaved(candidates, rounds)
    return min(t, key=t.get), t


def rel_diff(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


# -- the peers ------------------------------------------------------------------------------------
def _groups(sets, mode, chunk=None):
    """Index groups handed to a batched peer: 'equal' = sets of one length (chunked), 'buckets' =
    skset's padded length buckets (the best a batched peer can do with variable sizes)."""
    lengths = np.array([s.shape[0] for s in sets])
    if mode == "buckets":
        return length_batches(lengths, max_elements=32768, padding_tolerance=0.1)
    groups = []
    for n in np.unique(lengths):
        idx = np.flatnonzero(lengths == n)
        step = chunk or len(idx)
        groups += [idx[i:i + step] for i in range(0, len(idx), step)]
    return groups


def pot_embed(sets, Z, method, mode="equal", chunk=None):
    """POT's batched solver on the torch backend: uniform weights on equal-size groups (``a`` is
    given only for padded buckets, where padding must get zero mass)."""
    import ot

    p = Z.shape[0]
    out = np.empty((len(sets), Z.numel()), dtype=np.float32)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for idx in _groups(sets, mode, chunk):
            if mode == "buckets":
                X, mask = pack([sets[i] for i in idx])
                a = mask.to(X.dtype) / mask.sum(1, keepdim=True).to(X.dtype)
            else:
                X, a = torch.from_numpy(np.stack([sets[i] for i in idx])), None
            M = -(X @ Z.T)
            P = ot.solve_batch(M, reg=EPS, a=a, max_iter=ITERS, tol=0, method=method,
                               grad="detach").plan
            out[idx] = (torch.bmm(P.transpose(1, 2), X) * math.sqrt(p)).reshape(len(idx), -1)
    return out


def pot_loop(sets, Z, method):
    """One POT call per set (numpy backend), the usual way to use ``ot.sinkhorn``."""
    import ot

    Zn = Z.numpy()
    p = Zn.shape[0]
    b = np.full(p, 1.0 / p, dtype=np.float32)
    out = np.empty((len(sets), Z.numel()), dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, x in enumerate(sets):
            a = np.full(x.shape[0], 1.0 / x.shape[0], dtype=np.float32)
            P = ot.sinkhorn(a, b, -(x @ Zn.T), EPS, method=method, numItermax=ITERS, stopThr=0)
            out[i] = (P.T @ x).ravel() * math.sqrt(p)
    return out


def torch_plain(sets, Z):
    """A plain torch kernel-domain Sinkhorn on the stacked equal-size sets: what a user writes."""
    X = torch.from_numpy(np.stack(sets))
    B, n, _ = X.shape
    p = Z.shape[0]
    with torch.no_grad():
        E = torch.exp((X @ Z.T) / EPS - 1.0 / EPS)  # unit-norm rows: |<x, z>| <= |z|
        v = torch.ones(B, p, 1)
        for _ in range(ITERS):
            u = (1.0 / n) / torch.bmm(E, v)
            v = (1.0 / p) / torch.bmm(E.transpose(1, 2), u)
        emb = torch.bmm(E.transpose(1, 2), u * X) * v * math.sqrt(p)
    return emb.reshape(B, -1).numpy()


def ott_embed(sets, Z, lse_mode):
    """ott-jax: jit(vmap(Sinkhorn)) over padded groups of one shape (equal sizes: one compile)."""
    fn = _ott_fn(lse_mode)
    Zj = np.asarray(Z.numpy())
    out = np.empty((len(sets), Z.numel()), dtype=np.float32)
    for idx in _groups(sets, "buckets" if len({s.shape[0] for s in sets}) > 1 else "equal"):
        X, mask = pack([sets[i] for i in idx])
        n_pad = -(-X.shape[1] // 128) * 128 if len(set(mask.sum(1).tolist())) > 1 else X.shape[1]
        Xn = np.zeros((len(idx), n_pad, X.shape[2]), np.float32)
        Xn[:, :X.shape[1]] = X.numpy()
        m = np.zeros((len(idx), n_pad), np.float32)
        m[:, :X.shape[1]] = mask.numpy()
        out[idx] = np.asarray(fn(Xn, m / m.sum(1, keepdims=True), Zj)).reshape(len(idx), -1)
    return out


_OTT = {}


def _ott_fn(lse_mode):
    if lse_mode in _OTT:
        return _OTT[lse_mode]
    import jax
    import jax.numpy as jnp
    from ott.geometry import geometry
    from ott.problems.linear import linear_problem
    from ott.solvers.linear import sinkhorn

    solver = sinkhorn.Sinkhorn(lse_mode=lse_mode, threshold=-1.0, min_iterations=ITERS,
                               max_iterations=ITERS, inner_iterations=ITERS)

    def one(x, a, z):
        geom = geometry.Geometry(cost_matrix=-(x @ z.T), epsilon=EPS)
        P = solver(linear_problem.LinearProblem(geom, a=a)).matrix
        return (P.T @ x) * jnp.sqrt(z.shape[0])

    _OTT[lse_mode] = jax.jit(jax.vmap(one, in_axes=(0, 0, None)))
    return _OTT[lse_mode]


def _have_ott():
    try:
        import ott  # noqa: F401
        return True
    except ImportError:
        return False


# -- parts ----------------------------------------------------------------------------------------
def _otk_case(args, rng, lines, calib_lines, A, Bm, case, lengths):
    sets = make_sets(rng, lengths, DIM)
    est = OTKEmbedding(n_supports=P_SUPPORTS, epsilon=EPS, sinkhorn_iter=ITERS,
                       sinkhorn_tol=None, center=False, normalize=False, random_state=0,
                       max_samples=20_000).fit(sets[:200])
    Z = torch.as_tensor(est.references_[0])
    equal = case == "S1"
    fns = {"skset transform": lambda: est.transform(sets)}
    for method, label in (("log_sinkhorn", "POT solve_batch log_sinkhorn"),
                          ("sinkhorn", "POT solve_batch sinkhorn")):
        cands = {}
        if equal:
            for chunk in (None, 64, 128, 256):
                cands[f"equal-size groups, chunk {chunk or 'all'}"] = (
                    lambda c=chunk, m=method: pot_embed(sets, Z, m, "equal", c))
        else:
            cands["padded length buckets"] = lambda m=method: pot_embed(sets, Z, m, "buckets")
            cands["equal-size groups"] = lambda m=method: pot_embed(sets, Z, m, "equal")
        cands["one ot.sinkhorn call per set (numpy)"] = (
            lambda m=("sinkhorn_log" if method == "log_sinkhorn" else "sinkhorn"):
            pot_loop(sets, Z, m))
        best, tc = best_of(cands)
        calib_lines.append(f"| {case} | {label} | " + "; ".join(
            f"{k}: {v:.3f} s" for k, v in tc.items()) + f" | {best} |")
        fns[f"{label} ({best})"] = cands[best]
    if equal:
        fns["plain torch kernel-domain bmm (stacked, no checks)"] = lambda: torch_plain(sets, Z)
        Xs = torch.from_numpy(np.stack(sets))
        Ps = torch.rand(Xs.shape[0], Xs.shape[1], Z.shape[0])
        # a bound, not a peer: only the two matmuls every method does (similarity, pooling)
        fns[BOUND] = lambda: (Xs @ Z.T, torch.bmm(Ps.transpose(1, 2), Xs))
    if _have_ott() and not args.no_ott:
        fns["ott-jax Sinkhorn lse_mode, jit+vmap"] = lambda: ott_embed(sets, Z, True)
        fns["ott-jax Sinkhorn kernel mode, jit+vmap"] = lambda: ott_embed(sets, Z, False)
    fns["matmul 2048^2 (same rounds)"] = lambda: A @ Bm
    t = interleaved(fns, args.repeats)
    gemm = 2 * 2048**3 / t.pop("matmul 2048^2 (same rounds)") / 1e9
    n_el = sum(lengths)
    flops = 4 * n_el * P_SUPPORTS * DIM + ITERS * 4 * n_el * P_SUPPORTS
    ref = est.transform(sets)
    for k, sec in t.items():
        if k == BOUND:  # the matmul work only: its own flop count, no output to compare
            rate = 4 * n_el * P_SUPPORTS * DIM / sec / 1e9
            lines.append(f"| {case} | {k} | {len(sets) / sec:.0f} | {sec:.3f} | "
                         f"{sec / t['skset transform']:.2f} | - | {rate:.1f} | "
                         f"{rate / gemm:.2f} |")
            continue
        o = fns[k]()
        rate = flops / sec / 1e9
        lines.append(f"| {case} | {k} | {len(sets) / sec:.0f} | {sec:.3f} | "
                     f"{sec / t['skset transform']:.2f} | {rel_diff(o, ref):.1e} | "
                     f"{rate:.1f} | {rate / gemm:.2f} |")
    lines.append(f"| {case} | matmul 2048^2 float32, same rounds | - | - | - | - | "
                 f"{gemm:.1f} | 1.00 |")
    print("\n".join(lines[-len(t) - 1:]), flush=True)


def part_otk(args, rng, lines):
    A = torch.randn(2048, 2048)
    Bm = torch.randn(2048, 2048)
    n_sets = 512 if not args.quick else 64
    cases = [("S1", [100] * n_sets), ("S3", rng.integers(50, 1001, n_sets))]
    lines.append("## OTK transform against peers at their best (64 supports, epsilon 0.5, "
                 "10 iterations, float32)\n")
    lines.append("| case | method (best configuration) | sets/s | time (s) | skset x faster | "
                 "max rel diff vs skset | GFLOP/s | fraction of matmul |")
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|")
    calib_lines = []
    for case, lengths in cases:
        _otk_case(args, rng, lines, calib_lines, A, Bm, case, lengths)
    lines.append("")
    lines.append("S1: 512 sets x 100 elements; S3: 512 sets of 50..1000 elements (uniform); 128 "
                 "unit-norm features. GFLOP/s counts the similarity and pooling matmuls (2 x 2npd) "
                 "and two matrix-vector products per iteration (4np). Configurations tried for "
                 "each peer in the calibration round (best kept):\n")
    lines.append("| case | peer | calibration (2 rounds, median) | kept |")
    lines.append("|---|---|---|---|")
    lines.extend(calib_lines)
    lines.append("")


def _nystrom_case(args, rng, lines, n_sets, lo, hi, d, m):
    from sklearn.kernel_approximation import Nystroem

    if args.quick:
        n_sets //= 10
    sets = [rng.standard_normal((k, d)).astype(np.float32)
            for k in rng.integers(lo, hi + 1, n_sets)]
    nf = NystromFeatures(n_components=m, standardize=False, random_state=0).fit(sets[:200])
    gamma = 1.0 / (2 * nf.bandwidth_**2)  # the same Gaussian kernel
    sk = Nystroem(kernel="rbf", gamma=gamma, n_components=m, random_state=0).fit(
        np.concatenate(sets[:200]))
    sk.components_, sk.normalization_ = nf.anchors_, nf.normalization_  # the same anchors

    def sk_transform():
        pooled = np.concatenate(sets)
        return np.split(sk.transform(pooled), np.cumsum([len(s) for s in sets])[:-1])

    t = interleaved({"skset": lambda: nf.transform(sets), "sklearn": sk_transform},
                    args.repeats)
    lines.append(f"| {n_sets} x {lo}..{hi} x {d} | {m} | {n_sets / t['skset']:.0f} | "
                 f"{n_sets / t['sklearn']:.0f} | {t['sklearn'] / t['skset']:.2f} |")
    print(lines[-1], flush=True)


def part_nystrom(args, rng, lines):
    lines.append("## Nystrom features: skset transform vs scikit-learn Nystroem on the pooled "
                 "elements (equal work)\n")
    lines.append("| sets x elements x features | anchors | skset sets/s | scikit-learn sets/s | "
                 "skset x faster |")
    lines.append("|---|---:|---:|---:|---:|")
    for n_sets, lo, hi, d, m in ((2000, 20, 200, 32, 128), (500, 100, 1000, 64, 256)):
        _nystrom_case(args, rng, lines, n_sets, lo, hi, d, m)
    lines.append("")
    lines.append("Both sides map the same number of elements onto the same number of anchors "
                 "with the same Gaussian kernel (skset `standardize=False`), float32 in and out; "
                 "scikit-learn's time includes concatenating the sets and splitting its output "
                 "back per set, which a user of sets must do.\n")


def _st_case(args, rng, lines, n_sets, n, d):
    import torch.nn.functional as F
    from bench_set_transformer_step import PaddedST, copy_weights

    from skset.nn import SetTransformer

    if args.quick:
        n_sets //= 4
    X = torch.from_numpy(rng.standard_normal((n_sets, n, d)).astype(np.float32))
    M = torch.ones(n_sets, n, dtype=torch.bool)
    y = X.var(dim=(1, 2))[:, None]
    torch.manual_seed(0)
    ours = SetTransformer(d, 128, 1, 2, 4, n_inducing=16, n_seeds=1, norm="layer",
                          residual="original")
    plain = PaddedST(d, 128, 4, 16)
    copy_weights(plain, ours)
    with torch.no_grad():
        diff = float((ours(X, M) - plain(X)).abs().max())
    opts = {"ours": torch.optim.Adam(ours.parameters(), 1e-4),
            "plain": torch.optim.Adam(plain.parameters(), 1e-4)}

    def step(model, opt, *inputs):
        loss = F.mse_loss(model(*inputs), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    t = interleaved({"mask": lambda: step(ours, opts["ours"], X, M),
                     "nomask": lambda: step(ours, opts["ours"], X),
                     "plain": lambda: step(plain, opts["plain"], X)}, args.repeats)
    lines.append(f"| {n_sets} x {n} x {d} | {t['mask'] * 1e3:.1f} | {t['nomask'] * 1e3:.1f} | "
                 f"{t['plain'] * 1e3:.1f} | {t['plain'] / t['mask']:.2f} | {diff:.1e} |")
    print(lines[-1], flush=True)


def part_st(args, rng, lines):
    """One training step of a 2-ISAB Set Transformer on equal-size sets: skset's module (masked
    attention, as the estimators call it, and without a mask) against the plain torch
    implementation of the same architecture (``torch.nn.MultiheadAttention``, no mask: the peer at
    its best, since equal sizes need no padding), weights shared."""
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    lines.append("## Set Transformer training step (forward + backward + Adam) on equal-size "
                 "sets: skset vs plain torch\n")
    lines.append("| sets x elements x features | skset, mask (as in fit) ms | skset, no mask ms | "
                 "plain torch MHA ms | plain / skset (mask) | max abs diff of outputs |")
    lines.append("|---|---:|---:|---:|---:|---:|")
    for n_sets, n, d in ((64, 200, 3), (128, 50, 16)):
        _st_case(args, rng, lines, n_sets, n, d)
    lines.append("")
    lines.append("Width 128, 4 heads, 16 inducing points, 2 ISAB + PMA + MLP decoder (the "
                 "architecture of `bench_set_transformer_step.py`); outputs compared before "
                 "training with shared weights.\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--parts", default="otk,nystrom,st")
    ap.add_argument("--no-ott", action="store_true", help="skip ott-jax even if installed")
    ap.add_argument("--out", default=None, help="write the markdown tables to this file")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    import ot

    lines = [f"Run {datetime.datetime.now().isoformat(timespec='minutes')} on "
             f"{platform.machine()} ({os.cpu_count()} cores, {args.threads} torch threads), torch "
             f"{torch.__version__}, POT {ot.__version__}"
             + (f", ott-jax {__import__('ott').__version__}" if _have_ott() else "")
             + f"; args: {vars(args)}\n"]
    rng = np.random.default_rng(0)
    parts = set(args.parts.split(","))
    if "otk" in parts:
        part_otk(args, rng, lines)
    if "nystrom" in parts:
        part_nystrom(args, rng, lines)
    if "st" in parts:
        part_st(args, rng, lines)
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    print(text)


if __name__ == "__main__":
    main()
