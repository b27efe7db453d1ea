"""The compiled OTK transform (issue 26): eager and compiled ``OTKEmbedding.transform`` against POT
at its best and the machine's matmul rate, all in one run.

For S1 (512 sets x 100 elements x 128 features) and S3 (512 sets of 50..1000 elements x 128),
64 supports, epsilon 0.5, exactly 10 Sinkhorn iterations (``sinkhorn_tol=None``, POT's
``tol=0``: equal work), float32:

* eager: ``est.transform(sets)``; compiled: the same inside ``skset.config_context(compile=True)``;
* POT at its best, chosen in a calibration round as in ``bench_peers.py`` (``ot.solve_batch`` on the
  torch backend, log-domain ``log_sinkhorn`` and exp-domain ``sinkhorn``; S1: equal-size groups,
  whole or in chunks of 64/128/256 sets; S3: padded length buckets or equal-size groups). The
  numpy one-call-per-set loop is left out (30-60x slower than the batched solver in
  ``bench_peers.py``'s calibrations; ``--pot-loop`` adds it);
* the 2048^2 float32 matmul, interleaved in the same rounds: each method's GFLOP/s (the FLOP count
  of ``bench_peers.py``: the similarity and pooling matmuls, 2 x 2npd, and two matrix-vector
  products per iteration, 4np) as a share of the matmul's rate of the same rounds.

Every method runs once per round, ``--repeats`` rounds; the table gives the min and the median
(a shared machine: the min is the least disturbed, the median what a user sees), and ratios and
shares of the matmul rate from both. Compile time: the first compiled transform of the process,
with a fresh inductor cache (what a first user pays; ``--cache DIR`` to reuse one), minus an eager
transform, the sum of the kernels' first calls (``skset.ot._compiled.compile_seconds``), and the same
first call in a new process reusing the cache this run filled (what later processes pay). Also a
typical transform, eager vs compiled: the estimator's defaults (epsilon 0.1, tolerance 1e-4, cap
3000), which run more iterations than 10 (the same 64 supports).

Run::

    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_otk_compiled.py --out /tmp/otk_compiled.md
    python benchmarks/bench_otk_compiled.py --quick        # smoke run
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cases", default="S1,S3")
    ap.add_argument("--cache", default=None, help="inductor cache directory (default: a fresh one)")
    ap.add_argument("--pot-loop", action="store_true", help="also calibrate POT's per-set loop")
    ap.add_argument("--out", default=None, help="write the markdown tables to this file")
    return ap.parse_args()


ARGS = _args() if __name__ == "__main__" else None
if ARGS is not None:  # before torch is imported: the compile time is measured from a cold cache
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = ARGS.cache or tempfile.mkdtemp(prefix="skset_inductor_")

import datetime  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_peers import (  # noqa: E402
    DIM,
    EPS,
    ITERS,
    P_SUPPORTS,
    best_of,
    make_sets,
    pot_embed,
    pot_loop,
    rel_diff,
)

import skset  # noqa: E402
from skset import OTKEmbedding  # noqa: E402
from skset.ot import _compiled  # noqa: E402

GEMM = "matmul 2048^2"
COMPILE: dict = {}  # "cold": seconds of the process's first compilation


def rounds(fns: dict, repeats: int) -> dict:
    """Seconds of every callable in each of ``repeats`` rounds (all of them every round)."""
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return times


def _timed(f):
    t0 = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t0


def warm_cache_compile(threads: int) -> float:
    """Seconds of the first compiled transform in a new process that reuses this run's cache
    (minus an eager transform there)."""
    code = f"""
import os, sys, time
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
import numpy as np, torch, skset
from bench_peers import make_sets
torch.set_num_threads({threads})
sets = make_sets(np.random.default_rng(0), [100] * 64, 128)
est = skset.OTKEmbedding(n_supports=64, epsilon=0.5, sinkhorn_iter=10, sinkhorn_tol=None,
                         center=False, normalize=False, random_state=0).fit(sets)
est.transform(sets)
t0 = time.perf_counter(); est.transform(sets); te = time.perf_counter() - t0
t0 = time.perf_counter()
with skset.config_context(compile=True):
    est.transform(sets)
print(time.perf_counter() - t0 - te)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ), check=True)
    return float(out.stdout.strip().splitlines()[-1])


def pot_candidates(sets, Z, method, equal, with_loop):
    cands = {}
    if equal:
        for chunk in (None, 64, 128, 256):
            cands[f"equal-size groups, chunk {chunk or 'all'}"] = (
                lambda c=chunk: pot_embed(sets, Z, method, "equal", c))
    else:
        cands["padded length buckets"] = lambda: pot_embed(sets, Z, method, "buckets")
        cands["equal-size groups"] = lambda: pot_embed(sets, Z, method, "equal")
    if with_loop:
        cands["one ot.sinkhorn call per set (numpy)"] = (
            lambda: pot_loop(sets, Z, "sinkhorn_log" if method == "log_sinkhorn" else "sinkhorn"))
    return cands


def _settings(name):
    """Other settings timed eager vs compiled (not equal work with POT: no ratio to it)."""
    # a typical transform: the estimator's own epsilon (0.1) and stopping rule (tolerance 1e-4,
    # cap 3000), which runs more iterations than 10
    out = {"defaults (epsilon 0.1, tol 1e-4, cap 3000)": {}}
    if name == "S1":  # the log domain: most sets leave the exp domain's safe range at 0.01
        out["epsilon 0.01, 100 iterations (log-domain redo)"] = dict(
            epsilon=0.01, sinkhorn_iter=100, sinkhorn_tol=None)
    return out


def case(args, rng, name, lengths, A, B, lines, notes):
    sets = make_sets(rng, lengths, DIM)
    est = OTKEmbedding(n_supports=P_SUPPORTS, epsilon=EPS, sinkhorn_iter=ITERS, sinkhorn_tol=None,
                       center=False, normalize=False, random_state=0,
                       max_samples=20_000).fit(sets[:200])
    others = {label: OTKEmbedding(n_supports=P_SUPPORTS, center=False, normalize=False,
                                  random_state=0, max_samples=20_000, **kw).fit(sets[:200])
              for label, kw in _settings(name).items()}
    Z = torch.as_tensor(est.references_[0])

    def compiled(e=est):
        with skset.config_context(compile=True):
            return e.transform(sets)

    eager_out, t_eager = _timed(lambda: est.transform(sets))
    eager_out, t_eager = _timed(lambda: est.transform(sets))
    before = dict(_compiled.compile_seconds)
    comp_out, t_first = _timed(compiled)
    kernels = sum(v for k, v in _compiled.compile_seconds.items() if k not in before)
    notes.append(f"{name}: first compiled transform {t_first:.1f} s against {t_eager:.3f} s eager "
                 f"(kernels' first calls {kernels:.1f} s)")
    COMPILE.setdefault("cold", t_first - t_eager)
    if _compiled.compile_failed():
        raise SystemExit(f"compiling failed: {_compiled.compile_failed()}")
    for e in others.values():  # their kernels (log domain, remainder chunks), outside the timing
        compiled(e)
    fns = {"skset eager": lambda: est.transform(sets), "skset compiled": compiled}
    calib = []
    for method, label in (("log_sinkhorn", "POT solve_batch log_sinkhorn"),
                          ("sinkhorn", "POT solve_batch sinkhorn")):
        best, tc = best_of(pot_candidates(sets, Z, method, name == "S1", args.pot_loop))
        calib.append(f"{name} {label}: " + "; ".join(f"{k} {v:.3f} s" for k, v in tc.items())
                     + f" -> {best}")
        fns[f"{label} ({best})"] = (lambda m=method, b=best: pot_candidates(
            sets, Z, m, name == "S1", args.pot_loop)[b]())
    refs = {}
    for label, e in others.items():
        fns[f"{label}, eager"] = lambda e=e: e.transform(sets)
        fns[f"{label}, compiled"] = lambda e=e: compiled(e)
        refs[f"{label}, eager"] = refs[f"{label}, compiled"] = f"{label}, eager"
    fns[GEMM] = lambda: A @ B
    for f in fns.values():  # warm-up
        f()
    t = rounds(fns, args.repeats)
    g = 2 * 2048**3 / np.array(t.pop(GEMM)) / 1e9  # GFLOP/s of each round's matmul
    gemm_min, gemm_med = float(g.max()), float(np.median(g))
    n_el = int(np.sum(lengths))
    flops = 4 * n_el * P_SUPPORTS * DIM + ITERS * 4 * n_el * P_SUPPORTS
    med = {k: float(np.median(v)) for k, v in t.items()}
    pot_log = next(k for k in t if k.startswith("POT solve_batch log_sinkhorn"))
    for k, v in t.items():
        fixed = k not in refs
        out = fns[k]()
        ref = eager_out if fixed else fns[refs[k]]()
        share_min = flops / min(v) / 1e9 / gemm_min
        share_med = flops / med[k] / 1e9 / gemm_med
        lines.append(
            f"| {name} | {k} | {len(sets) / med[k]:.0f} | {min(v) * 1e3:.1f} | {med[k] * 1e3:.1f} | "
            + (f"{min(t[pot_log]) / min(v):.2f} / {med[pot_log] / med[k]:.2f} | " if fixed
               else "- | ")
            + (f"{share_min:.2f} / {share_med:.2f} | " if fixed else "- | ")
            + f"{rel_diff(out, ref):.1e} |")
    lines.append(f"| {name} | {GEMM} float32, same rounds (GFLOP/s best / median) | - | - | - | - | "
                 f"{gemm_min:.0f} / {gemm_med:.0f} | - |")
    gain = med["skset eager"] - med["skset compiled"]
    speedups = "; ".join(f"{label} {med[label + ', eager'] / med[label + ', compiled']:.2f}x"
                         for label in others)
    notes.append(f"{name}: compiled / eager (medians): 10 iterations "
                 f"{med['skset eager'] / med['skset compiled']:.2f}x; {speedups}"
                 + (f"; at 10 iterations the process's first compilation ({COMPILE['cold']:.0f} s) "
                    f"is paid back after {COMPILE['cold'] / gain:.0f} transforms of this size"
                    if gain > 0 else ""))
    notes.extend(calib)
    print("\n".join(lines[-len(t) - 1:]), flush=True)


def main():
    args = ARGS
    torch.set_num_threads(args.threads)
    import ot

    lines = [f"Run {datetime.datetime.now().isoformat(timespec='minutes')} on "
             f"{platform.machine()} ({os.cpu_count()} cores, {args.threads} torch threads), torch "
             f"{torch.__version__}, POT {ot.__version__}; args: {vars(args)}\n",
             "| case | method | sets/s (median) | min (ms) | median (ms) | x POT log (min / median) | "
             "share of the matmul rate (best / median) | max rel diff vs eager |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    notes = []
    rng = np.random.default_rng(0)
    A, B = torch.randn(2048, 2048), torch.randn(2048, 2048)
    n_sets = 512 if not args.quick else 64
    all_cases = {"S1": [100] * n_sets, "S3": rng.integers(50, 1001, n_sets)}
    for name in args.cases.split(","):
        case(args, rng, name, all_cases[name], A, B, lines, notes)
    warm = warm_cache_compile(args.threads)
    notes.append(f"first compiled transform in a new process reusing this run's inductor cache: "
                 f"{warm:.1f} s more than an eager one")
    text = "\n".join(lines) + "\n\n" + "\n".join(f"* {n}" for n in notes) + "\n"
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    print(text)


if __name__ == "__main__":
    main()
