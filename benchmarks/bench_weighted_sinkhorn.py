"""Weighted (element mass) and unbalanced (semi-relaxed) Sinkhorn: skset against POT.

One run, single-threaded, float64 (POT's numpy default), fixed work: every solver runs exactly
``N_ITER`` iterations (skset ``n_iter=N_ITER, tol=None``; POT ``numItermax=N_ITER, stopThr=0`` or
``max_iter=N_ITER, tol=0``). Problems: ``B`` sets of ``n`` elements with random non-negative
masses (uniform in [0.1, 1]: POT's plain unbalanced solver mishandles a mass of 0, which skset
gives an empty row), ``p`` supports, similarity ``K = <x, z>`` of Gaussian features scaled to unit
average norm, ``epsilon`` 0.1 (POT: cost ``-K``, ``reg=epsilon``); unbalanced: ``reg_m=(rho, inf)``
for POT, ``reg_m=rho`` for skset (the set side relaxed, the reference side exact).

Solvers, all timed in the same rounds (interleaved, median over rounds):

* skset ``sinkhorn(..., weights=W[, reg_m=rho])`` with ``method="log"`` and ``method="auto"``
  (exp domain, log where unsafe), one batched call;
* POT balanced: ``ot.solve_batch(M, reg, a=A, b=Bm, method=...)`` (its batched solver, which takes
  batched weights): ``"sinkhorn"`` on numpy arrays and on torch tensors, ``"log_sinkhorn"`` on
  torch tensors; and ``ot.sinkhorn(a, b, M, reg, method="sinkhorn")`` in a loop over sets
  (numpy). POT's slower configurations (``solve_batch`` ``"log_sinkhorn"`` on numpy arrays, a loop
  of ``ot.sinkhorn(..., method="sinkhorn_log")``: 10-100x slower in a first run) are left out to
  keep the run short;
* POT unbalanced: ``ot.unbalanced.sinkhorn_unbalanced(a, b, M, reg, (rho, inf),
  method="sinkhorn" | "sinkhorn_stabilized")`` in a loop over sets (no batched unbalanced solver
  in POT 0.9.7), numpy and torch backends.

The "max |P - P_log|" column is each plan's largest entry-wise difference from skset's log
domain plan (same iterations from the same start: agreement up to where each solver starts its
iterations). Run: ``OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python
benchmarks/bench_weighted_sinkhorn.py [--rounds 5] [--out benchmarks/results/weighted_sinkhorn.md]``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import ot  # noqa: E402
import torch  # noqa: E402

from skset.ot import sinkhorn  # noqa: E402

N_ITER = 100
EPS = 0.1
RHO = 0.5
CASES = [(256, 50, 16, 8), (64, 200, 32, 8)]  # (B, n, p, d)


def problem(B, n, p, d, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(B, n, d)) / np.sqrt(d)
    z = rng.normal(size=(p, d)) / np.sqrt(d)
    K = x @ z.T  # (B, n, p)
    W = rng.uniform(0.1, 1.0, size=(B, n))
    A = W / W.sum(1, keepdims=True)
    return K, W, A


def solvers(K, W, A, p, unbalanced):
    Kt, Wt = torch.from_numpy(K), torch.from_numpy(W)
    M = np.ascontiguousarray(-K)
    Mt = torch.from_numpy(M)
    b = np.full(p, 1.0 / p)
    bt = torch.from_numpy(b)
    Bm = np.tile(b, (K.shape[0], 1))
    At, Bmt = torch.from_numpy(A), torch.from_numpy(Bm)
    rho = RHO if unbalanced else None
    out = {
        "skset log": lambda: sinkhorn(Kt, None, epsilon=EPS, n_iter=N_ITER, method="log",
                                      weights=Wt, reg_m=rho).numpy(),
        "skset auto": lambda: sinkhorn(Kt, None, epsilon=EPS, n_iter=N_ITER, method="auto",
                                       weights=Wt, reg_m=rho).numpy(),
    }
    if not unbalanced:
        out["POT solve_batch sinkhorn (numpy)"] = (
            lambda: np.asarray(ot.solve_batch(M, EPS, a=A, b=Bm, max_iter=N_ITER, tol=0,
                                              method="sinkhorn").plan))
        for meth in ("log_sinkhorn", "sinkhorn"):
            out[f"POT solve_batch {meth} (torch)"] = (
                lambda meth=meth: ot.solve_batch(Mt, EPS, a=At, b=Bmt, max_iter=N_ITER, tol=0,
                                                 method=meth).plan.numpy())
        out["POT ot.sinkhorn sinkhorn loop (numpy)"] = (
            lambda: np.stack([ot.sinkhorn(A[i], b, M[i], EPS, method="sinkhorn",
                                          numItermax=N_ITER, stopThr=0) for i in range(len(M))]))
    else:
        for meth in ("sinkhorn", "sinkhorn_stabilized"):
            out[f"POT sinkhorn_unbalanced {meth} loop (numpy)"] = (
                lambda meth=meth: np.stack([ot.unbalanced.sinkhorn_unbalanced(
                    A[i], b, M[i], EPS, (RHO, float("inf")), method=meth, numItermax=N_ITER,
                    stopThr=0) for i in range(len(M))]))
        out["POT sinkhorn_unbalanced sinkhorn loop (torch)"] = (
            lambda: torch.stack([ot.unbalanced.sinkhorn_unbalanced(
                At[i], bt, Mt[i], EPS, (RHO, float("inf")), method="sinkhorn",
                numItermax=N_ITER, stopThr=0) for i in range(len(M))]).numpy())
    return out


def run(rounds):
    rows = []
    for B, n, p, d in CASES:
        K, W, A = problem(B, n, p, d)
        for unbalanced in (False, True):
            fns = solvers(K, W, A, p, unbalanced)
            times = {k: [] for k in fns}
            plans = {}
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                for k, f in fns.items():  # warm-up, and the plans
                    plans[k] = f()
                for _ in range(rounds):
                    for k, f in fns.items():
                        t0 = time.perf_counter()
                        f()
                        times[k].append(time.perf_counter() - t0)
            ref = plans["skset log"]
            med = {k: float(np.median(v)) for k, v in times.items()}
            best_pot = min(v for k, v in med.items() if k.startswith("POT"))
            for k in fns:
                rows.append((f"{B} x {n} x {p}", "unbalanced" if unbalanced else "balanced", k,
                             med[k], best_pot / med[k], float(np.abs(plans[k] - ref).max())))
            print(rows[-len(fns):], flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    rows = run(args.rounds)
    lines = [
        f"Run {datetime.datetime.now():%Y-%m-%dT%H:%M}, {platform.processor() or platform.machine()}"
        f", torch {torch.__version__} ({torch.get_num_threads()} thread), POT {ot.__version__}, "
        f"numpy {np.__version__}; float64, epsilon {EPS}, reg_m {RHO} (unbalanced), {N_ITER} "
        f"iterations for every solver, median of {args.rounds} interleaved rounds; "
        f"total {time.perf_counter() - t0:.0f} s.",
        "",
        "| sets x elements x supports | problem | solver | time (ms) | speed-up vs POT's fastest "
        "| max \\|P - P_log\\| |",
        "|---|---|---|---|---|---|",
    ]
    for case, prob, k, t, ratio, err in rows:
        lines.append(f"| {case} | {prob} | {k} | {1e3 * t:.1f} | {ratio:.2f}x | {err:.1e} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
