"""OTKEmbedding.transform: speed, stability, length bucketing, matmul efficiency and memory.

Everything is measured side by side in one run (float32, 2 torch threads, CPU unless CUDA is there):

1. speed: OTKEmbedding.transform (fitted, center=False, normalize=False: the raw embedding) against
   the same pipeline (similarity matmul, plan, sqrt(p) P^T x pooling) with the plan from
   (a) POT ``ot.solve_batch(M, reg, max_iter, tol=0, method="log_sinkhorn")`` (torch backend),
   (b) the same with ``method="sinkhorn"``, (c) ``ot.bregman.sinkhorn_log`` in a loop over sets.
   All of them run the same fixed number of iterations (transform with ``sinkhorn_tol=None``:
   equal work). One more row, "skset transform, default stopping", is transform with the
   estimator's default ``sinkhorn_iter`` / ``sinkhorn_tol`` (cap and tolerance), for its cost
   against the fixed 10 iterations; its "max rel diff vs (a)" is then mostly how far 10
   iterations are from convergence. POT runs on the same length batches (same padded-element
   budget) as transform, which is not POT's best configuration: the comparison against every
   peer at its best is ``benchmarks/bench_peers.py``.
2. stability at small epsilon on unit-norm (Nystrom-scale) features.
3. length bucketing: lengths uniform in 50..1000, sorted length batches vs the same code on
   batches in input order (length_batches(sort=False)).
4. achieved GFLOP/s of transform against a large torch.matmul measured in the same run.
5. memory of transform on many long sets against one batch's tensors and the all-at-once size:
   peak RSS above the baseline during one call (glibc mmap threshold pinned low and malloc_trim
   before each call so freed buffers go back to the OS; VmHWM reset through
   /proc/self/clear_refs), or torch.cuda.max_memory_allocated on CUDA. Run last (the pin slows
   allocation-heavy code, see :func:`pin_mmap_threshold`).
6. transform time against the padded-element budget per batch (``max_elements``).

Run: ``OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_otk_transform.py [--quick]``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import ctypes  # noqa: E402

try:
    _libc = ctypes.CDLL("libc.so.6")
except OSError:  # pragma: no cover
    _libc = None


def pin_mmap_threshold():
    """Pin glibc's mmap threshold low so that large freed buffers leave RSS (honest peak deltas).

    Only for the memory part, run after every timed part: with the pin each large temporary is a
    fresh mmap and page-faults in, which slows allocation-heavy code (POT's log-domain solver
    2.3x, its exp-domain one 3.5x, skset less; measured). Until 2026-11-23 this was set at
    import, and the speed table of part 1 was timed under it (issue 14).
    """
    if _libc is not None:
        _libc.mallopt(-3, 1 << 16)  # M_MMAP_THRESHOLD

import argparse  # noqa: E402
import datetime  # noqa: E402
import gc  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.base import clone  # noqa: E402

import skset  # noqa: E402
from skset import OTKEmbedding  # noqa: E402
from skset._sets import iter_packed  # noqa: E402

DTYPE = torch.float32


# -- measurement helpers --------------------------------------------------------------------------
def _rss_kb(field="VmRSS") -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def peak_memory_mb(fn, device):
    """Peak memory (MiB) above the baseline while ``fn()`` runs."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2**20
    if _libc is not None:
        _libc.malloc_trim(0)
    base = _rss_kb()
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # reset VmHWM to the current RSS
    except OSError:  # pragma: no cover
        pass
    fn()
    return (_rss_kb("VmHWM") - base) / 1024


def side_by_side(fns: dict, repeats: int, device) -> dict:
    """Median seconds per callable, interleaving the callables in each round (shared machine)."""
    times = {k: [] for k in fns}
    for f in fns.values():  # warm-up
        f()
    for _ in range(repeats):
        for k, f in fns.items():
            if device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            f()
            if device.type == "cuda":
                torch.cuda.synchronize()
            times[k].append(time.perf_counter() - t0)
    return {k: float(np.median(v)) for k, v in times.items()}


def make_sets(rng, lengths, d, n_clusters=16):
    """Unit-norm elements around a few random directions (the scale of Nystrom features)."""
    centers = rng.standard_normal((n_clusters, d)).astype(np.float32)
    out = []
    for n in lengths:
        c = centers[rng.integers(n_clusters, size=n)]
        x = c + 0.7 * rng.standard_normal((n, d)).astype(np.float32)
        out.append((x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32))
    return out


def fitted_otk(sets, p, epsilon, iters, device, **kw):
    kw.setdefault("sinkhorn_tol", None)  # exactly `iters` iterations, as POT's tol=0
    est = OTKEmbedding(n_supports=p, epsilon=epsilon, sinkhorn_iter=iters, center=False,
                       normalize=False, max_samples=20_000, random_state=0,
                       device=str(device), **kw)
    return est.fit(sets[: min(len(sets), 200)])


# -- POT pipelines --------------------------------------------------------------------------------
def pot_embed(est, sets, method):
    """Same batches, similarity and pooling as transform; the plan from POT."""
    import ot

    Z = torch.as_tensor(est.references_[0], device=est.device_)
    p = Z.shape[0]
    out = np.empty((len(sets), Z.numel()), dtype=np.float32)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for idx, X, mask in iter_packed(sets, device=est.device_, dtype=DTYPE,
                                     max_elements=est.max_elements):
            M = -(X @ Z.T)
            n_real = mask.sum(1)
            if method == "loop":  # each set on its own, unpadded
                b = torch.full((p,), 1.0 / p, device=X.device)
                P = torch.zeros_like(M)
                for i, m in enumerate(n_real.tolist()):
                    a = torch.full((m,), 1.0 / m, device=X.device)
                    P[i, :m] = ot.bregman.sinkhorn_log(a, b, M[i, :m], est.epsilon,
                                                       numItermax=est.sinkhorn_iter, stopThr=0)
            else:  # padded rows get zero mass through a
                a = mask.to(M.dtype) / n_real[:, None].to(M.dtype)
                b = torch.full((M.shape[0], p), 1.0 / p, dtype=M.dtype, device=M.device)
                P = ot.solve_batch(M, reg=est.epsilon, a=a, b=b, max_iter=est.sinkhorn_iter, tol=0,
                                   method=method, grad="detach").plan
            emb = torch.bmm(P.transpose(1, 2), X) * math.sqrt(p)
            out[idx] = emb.reshape(len(idx), -1).cpu().numpy()
    return out


def rel_diff(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


# -- parts ----------------------------------------------------------------------------------------
def part_speed(args, device, rng, lines, gemm_gflops):
    lines.append("## 1. Speed: transform vs POT (same cost, same pooling, same batches)\n")
    lines.append("| sets x elements x features | method | sets/s (median) | time (s) | x POT log "
                 "batched | max rel diff vs (a) | achieved GFLOP/s | fraction of GEMM |")
    lines.append("|---|---|---|---|---|---|---|---|")
    p, eps, iters, d = 64, 0.5, 10, 128
    cases = [(512, 100), (1024, 500)] if not args.quick else [(128, 100), (128, 500)]
    for n_sets, n in cases:
        _speed_case(args, device, rng, lines, gemm_gflops, n_sets, n, d, p, eps, iters)
        gc.collect()


def _speed_case(args, device, rng, lines, gemm_gflops, n_sets, n, d, p, eps, iters):
    if True:
        sets = make_sets(rng, [n] * n_sets, d)
        est = fitted_otk(sets, p, eps, iters, device)
        defaults = OTKEmbedding()
        est_def = clone(est).set_params(sinkhorn_iter=defaults.sinkhorn_iter,
                                        sinkhorn_tol=defaults.sinkhorn_tol)
        est_def.fit(sets[: min(len(sets), 200)])
        fns = {
            "skset transform": lambda: est.transform(sets),
            "(a) POT solve_batch log_sinkhorn": lambda: pot_embed(est, sets, "log_sinkhorn"),
            "(b) POT solve_batch sinkhorn": lambda: pot_embed(est, sets, "sinkhorn"),
            f"skset transform, default stopping (cap {defaults.sinkhorn_iter}, tol "
            f"{defaults.sinkhorn_tol:g})": lambda: est_def.transform(sets),
        }
        if device.type == "cuda":  # POT 0.9.7's batched Sinkhorn starts a vector on the CPU
            del fns["(b) POT solve_batch sinkhorn"]
        loop_sets = sets if not args.quick else sets[:32]
        t = side_by_side(fns, args.repeats, device)
        t["(c) POT sinkhorn_log loop"] = side_by_side(
            {"c": lambda: pot_embed(est, loop_sets, "loop")}, 1, device)["c"] * (
                len(sets) / len(loop_sets))
        ref = fns["(a) POT solve_batch log_sinkhorn"]()
        outs = {k: f() for k, f in fns.items()}
        outs["(c) POT sinkhorn_log loop"] = pot_embed(est, loop_sets, "loop")
        # FLOPs: similarity 2npk, pooling 2npk, Sinkhorn 2 matvecs of 2np per iteration
        flops = n_sets * (4 * n * p * d + iters * 4 * n * p)
        exps = n_sets * n * p
        for k in t:
            o = outs[k]
            rd = rel_diff(o, ref[: len(o)])
            achieved = flops / t[k] / 1e9
            rate = ("- | - |" if "default stopping" in k  # not `iters` iterations: no flop count
                    else f"{achieved:.1f} | {achieved / gemm_gflops:.2f} |")
            lines.append(f"| {n_sets} x {n} x {d} | {k} | {n_sets / t[k]:.0f} | {t[k]:.3f} | "
                         f"{t['(a) POT solve_batch log_sinkhorn'] / t[k]:.2f} | "
                         f"{rd:.1e} | {rate}")
        lines.append("")
        lines.append(f"{n_sets} x {n}: transform work = {flops / 1e9:.2f} GFLOP (matmul + Sinkhorn "
                     f"matvecs) + {exps / 1e6:.1f} M exp; all sets one length (no padding). "
                     f"(c) timed on {len(loop_sets)} sets and scaled.\n")
        print("\n".join(lines[-len(t) - 2:]), flush=True)


def part_stability(args, device, rng, lines):
    import ot

    lines.append("## 2. Stability at small epsilon (unit-norm features, 64 supports, 10 iters)\n")
    lines.append("| epsilon | method | non-finite embeddings | sets on log fallback | "
                 "max rel diff vs sinkhorn_method='log' | time (s) |")
    lines.append("|---|---|---|---|---|---|")
    n_sets = 256 if not args.quick else 64
    lengths = rng.integers(50, 300, size=n_sets)
    sets = make_sets(rng, lengths, 64)
    from skset.ot import sinkhorn_exp

    for eps in (1e-3, 1e-2, 0.05):
        est = fitted_otk(sets, 64, eps, 10, device)
        est_log = fitted_otk(sets, 64, eps, 10, device, sinkhorn_method="log")
        t0 = time.perf_counter()
        emb = est.transform(sets)
        ta = time.perf_counter() - t0
        t0 = time.perf_counter()
        emb_log = est_log.transform(sets)
        tl = time.perf_counter() - t0
        # how many sets the exp-domain iterations hand to the log domain
        n_fallback = 0
        Z = torch.as_tensor(est.references_, device=est.device_)
        with torch.no_grad():
            for _, X, Mk in iter_packed(sets, device=est.device_, max_elements=est.max_elements):
                _, ok = sinkhorn_exp(X @ Z[0].T, Mk, epsilon=eps, return_ok=True)
                n_fallback += int((~ok).sum())
        bad = int((~np.isfinite(emb).all(1)).sum())
        lines.append(f"| {eps:g} | skset auto | {bad}/{n_sets} | {n_fallback}/{n_sets} | "
                     f"{rel_diff(emb, emb_log):.1e} | {ta:.2f} |")
        lines.append(f"| {eps:g} | skset log | {int((~np.isfinite(emb_log).all(1)).sum())}/"
                     f"{n_sets} | - | 0 | {tl:.2f} |")
        for method in ("sinkhorn", "log_sinkhorn"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                e = pot_embed(est, sets, method)
                tp = time.perf_counter() - t0
            nb = int((~np.isfinite(e).all(1)).sum())
            rd = rel_diff(np.nan_to_num(e), emb_log)
            lines.append(f"| {eps:g} | POT solve_batch {method} | {nb}/{n_sets} | - | "
                         f"{rd:.1e} | {tp:.2f} |")
        print("\n".join(lines[-4:]), flush=True)
    del ot
    lines.append("")
    lines.append(f"{n_sets} sets, lengths 50..300, 64 unit-norm features (Nystrom scale).\n")


class _UnsortedOTK(OTKEmbedding):
    """The same transform on batches in input order (no length bucketing)."""

    def _batches(self, sets, masses=None):  # no element masses in this benchmark
        for idx, X, M in iter_packed(sets, device=self.device_, dtype=self._tdtype,
                                     max_elements=self.max_elements, sort=False):
            yield idx, X, M, None


class _BudgetOnlyOTK(OTKEmbedding):
    """Sorted by length, batches filled to the budget only (no padding tolerance)."""

    def _batches(self, sets, masses=None):  # no element masses in this benchmark
        for idx, X, M in iter_packed(sets, device=self.device_, dtype=self._tdtype,
                                     max_elements=self.max_elements, padding_tolerance=None):
            yield idx, X, M, None


def part_bucketing(args, device, rng, lines):
    lines.append("## 3. Length bucketing (lengths uniform 50..1000)\n")
    n_sets = 1000 if not args.quick else 150
    d, p = 64, 64
    lengths = rng.integers(50, 1001, size=n_sets)
    sets = make_sets(rng, lengths, d)
    est = fitted_otk(sets, p, 0.5, 10, device)
    uns = _UnsortedOTK(**est.get_params())
    uns.__dict__.update({k: v for k, v in est.__dict__.items() if k.endswith("_")})
    bud = _BudgetOnlyOTK(**est.get_params())
    bud.__dict__.update({k: v for k, v in est.__dict__.items() if k.endswith("_")})
    t = side_by_side({"sorted": lambda: est.transform(sets),
                      "sorted, budget only": lambda: bud.transform(sets),
                      "unsorted": lambda: uns.transform(sets)}, max(1, args.repeats - 2), device)
    diff = rel_diff(uns.transform(sets), est.transform(sets))
    from skset._sets import length_batches

    def padded(sort, tol):
        return sum(len(b) * lengths[b].max() for b in
                   length_batches(lengths, max_elements=est.max_elements, sort=sort,
                                  padding_tolerance=tol))

    lines.append("| batching | time (s) | sets/s | padded/real elements | speed-up |")
    lines.append("|---|---|---|---|---|")
    for k, sort, tol in (("unsorted", False, None), ("sorted, budget only", True, None),
                         ("sorted", True, 0.1)):
        lines.append(f"| {k} | {t[k]:.3f} | {n_sets / t[k]:.0f} | "
                     f"{padded(sort, tol) / lengths.sum():.2f} | {t['unsorted'] / t[k]:.2f} |")
    lines.append("")
    lines.append(f"{n_sets} sets, d={d}, p={p}, epsilon 0.5, max_elements={est.max_elements}; "
                 f"embeddings equal to {diff:.1e} relative.\n")
    print("\n".join(lines[-6:]), flush=True)


def part_memory(args, device, rng, lines):
    lines.append("## 5. Memory: many long sets\n")
    n_sets = 20_000 if not args.quick else 2_000
    d, p = 32, 64
    lengths = rng.integers(50, 1001, size=n_sets)
    t0 = time.perf_counter()
    # cheap generation: unit-norm Gaussian elements (scale only matters for speed here)
    sets = []
    for n in lengths:
        x = rng.standard_normal((n, d), dtype=np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        sets.append(x)
    est = fitted_otk(sets, p, 0.5, 10, device)
    t_gen = time.perf_counter() - t0
    out_mb = n_sets * p * d * 4 / 2**20
    in_mb = sum(s.nbytes for s in sets) / 2**20
    B_max = est.max_elements
    # one batch: X (budget x d), similarity, scaled/exp block, plan (budget x p each), pooled
    one_batch_mb = B_max * (d + 3 * p) * 4 / 2**20
    all_at_once_mb = n_sets * lengths.max() * (d + 3 * p) * 4 / 2**20
    t0 = time.perf_counter()
    peak = peak_memory_mb(lambda: est.transform(sets), device)
    t_tr = time.perf_counter() - t0
    lines.append(f"{n_sets} sets, lengths uniform 50..1000 ({lengths.sum() / 1e6:.1f} M elements), "
                 f"d={d}, p={p}, epsilon 0.5, max_elements={B_max}; input {in_mb:.0f} MiB "
                 f"(generated in {t_gen:.0f} s), transform {t_tr:.1f} s.\n")
    lines.append("| quantity | MiB |")
    lines.append("|---|---|")
    lines.append(f"| measured peak above baseline during transform "
                 f"({'CUDA max_memory_allocated' if device.type == 'cuda' else 'RSS, VmHWM'}) "
                 f"| {peak:.0f} |")
    lines.append(f"| of which the returned embedding (n_sets x p x d float32) | {out_mb:.0f} |")
    lines.append(f"| one batch's tensors implied by max_elements (X, similarity, E, plan) | "
                 f"{one_batch_mb:.0f} |")
    lines.append(f"| the same all at once, padded to the longest set | {all_at_once_mb:.0f} |")
    lines.append("")
    print("\n".join(lines[-8:]), flush=True)


def part_budget(args, device, rng, lines):
    """6. transform time against the padded-element budget ``max_elements`` (the default's choice)."""
    quick = args.quick
    cases = [("1024 x 500 x 128, p=64", [500] * (64 if quick else 1024), 128, 64),
             ("2000 x 50..1000 x 32, p=64", rng.integers(50, 1001, 100 if quick else 2000), 32, 64),
             ("4000 x 20..200 x 128, p=16", rng.integers(20, 201, 200 if quick else 4000), 128, 16)]
    budgets = (8192, 16384, 32768, 65536, 131072)
    lines.append("## 6. Padded-element budget per batch (max_elements): transform seconds, "
                 f"median of {args.repeats} interleaved rounds\n")
    lines.append("| sets x elements x features | " + " | ".join(map(str, budgets))
                 + " | 131072 / 32768 |")
    lines.append("|---|" + "---|" * (len(budgets) + 1))
    for name, lengths, d, p in cases:
        sets = make_sets(rng, lengths, d)
        est = OTKEmbedding(n_supports=p, epsilon=0.5, device=device, random_state=0).fit(sets[:200])
        fns = {b: (lambda b=b, est=est, sets=sets: est.set_params(max_elements=b).transform(sets))
               for b in budgets}
        t = side_by_side(fns, args.repeats, device)
        lines.append(f"| {name} | " + " | ".join(f"{t[b]:.3f}" for b in budgets)
                     + f" | {t[131072] / t[32768]:.2f} |")
        print(lines[-1], flush=True)
    lines.append("")


def gemm_rate(device, size=2048, repeats=7):
    A = torch.randn(size, size, device=device, dtype=DTYPE)
    Bm = torch.randn(size, size, device=device, dtype=DTYPE)
    t = side_by_side({"mm": lambda: A @ Bm}, repeats, device)["mm"]
    return 2 * size**3 / t / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, a smoke test")
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats per method (median)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--parts", default="1,2,3,5",
                    help="comma list of parts to run (4 is in 1; 6: the budget scan)")
    ap.add_argument("--out", default=None, help="append the markdown tables to this file")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available()
                          else ("cpu" if args.device == "auto" else args.device))
    import ot

    rng = np.random.default_rng(0)
    lines = [f"Run {datetime.datetime.now().isoformat(timespec='minutes')} on {device} "
             f"({platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
             f"{args.threads} torch threads), torch {torch.__version__}, POT {ot.__version__}, "
             f"skset from {os.path.dirname(skset.__file__)}; args: {vars(args)}\n"]
    gemm = gemm_rate(device)
    lines.append(f"## 4. Machine float32 matmul rate (2048^2 torch.matmul, median of 7): "
                 f"{gemm:.1f} GFLOP/s\n")
    print("\n".join(lines), flush=True)
    parts = set(args.parts.split(","))
    if "1" in parts:
        part_speed(args, device, rng, lines, gemm)
        lines.append(f"Part 4 (matmul efficiency) is the last two columns above; GEMM re-measured "
                     f"after part 1: {gemm_rate(device):.1f} GFLOP/s.\n")
    if "2" in parts:
        part_stability(args, device, rng, lines)
    if "3" in parts:
        part_bucketing(args, device, rng, lines)
    if "6" in parts:
        part_budget(args, device, rng, lines)
    if "5" in parts:  # last: the pin distorts the timing of anything after it
        pin_mmap_threshold()
        part_memory(args, device, rng, lines)
    if args.out:
        with open(args.out, "a") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
