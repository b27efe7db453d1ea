"""OTKEmbedding's Sinkhorn stopping rule: error against a 5,000-iteration solve, and time.

For each data set (Nystrom features, ``NystromFeatures()`` defaults, of: random Gaussian sets;
the Japanese vowels, train + test; sets whose element norms are heavy-tailed: lognormal scale
factors of sigma 0.5 and 1, Student-t(3) entries) and each epsilon (0.5, 0.1), the references are
fitted once (k-means, ``OTKEmbedding(epsilon=eps)``), then the raw embedding (no centring or
normalisation) is computed with several ``(sinkhorn_iter, sinkhorn_tol)`` settings and compared with
``sinkhorn_iter=5000, sinkhorn_tol=None``:

* rel err: ``||E - E_5000||_F / ||E_5000||_F`` over all sets;
* max set err: the largest per-set relative error;
* time: transform's Sinkhorn + pooling, best of 2 (float32, 2 torch threads, CPU), seconds.

Run: ``OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_sinkhorn_tol.py [--quick] [--out FILE]``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import datetime  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402
from skset.datasets import load_japanese_vowels  # noqa: E402

SETTINGS = [(10, None), (100, None), (100, 1e-4), (300, 1e-4), (1000, 1e-3), (1000, 1e-4),
            (3000, 1e-4)]


def datasets(n_sets, rng):
    lengths = rng.integers(10, 60, n_sets)
    Xtr = load_japanese_vowels(subset="train", return_X_y=True)[0]
    Xte = load_japanese_vowels(subset="test", return_X_y=True)[0]
    return {
        "random Gaussian": [rng.normal(size=(int(n), 12)) for n in lengths],
        "Japanese vowels": (Xtr + Xte)[: 640 if n_sets >= 400 else n_sets],
        "lognormal(0.5) norms": [rng.normal(size=(int(n), 12)) * rng.lognormal(sigma=0.5,
                                 size=(int(n), 1)) for n in lengths],
        "lognormal(1) norms": [rng.normal(size=(int(n), 12)) * rng.lognormal(sigma=1.0,
                               size=(int(n), 1)) for n in lengths],
        "Student-t(3) entries": [rng.standard_t(3, size=(int(n), 12)) for n in lengths],
    }


def raw(est, F, n_iter, tol):
    """The fitted ``est``'s raw embedding of ``F`` with these Sinkhorn settings, and its time."""
    e = est.set_params(sinkhorn_iter=n_iter, sinkhorn_tol=tol)  # transform reads them
    best, out = np.inf, None
    for _ in range(2):
        t0 = time.perf_counter()
        out = e.transform(F)
        best = min(best, time.perf_counter() - t0)
    return out, best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 sets per data set")
    ap.add_argument("--out", default=None, help="append the markdown table to this file")
    args = ap.parse_args()
    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    default = OTKEmbedding()
    lines = [f"Run {datetime.datetime.now().isoformat(timespec='minutes')}, torch "
             f"{torch.__version__}, {os.cpu_count()} cores, 2 torch threads; defaults: "
             f"sinkhorn_iter={default.sinkhorn_iter}, sinkhorn_tol={default.sinkhorn_tol}\n",
             "| data (feature norms: median / max) | epsilon | sinkhorn_iter | sinkhorn_tol | "
             "rel err vs 5000 it. | max set err | time (s) |",
             "|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    for name, sets in datasets(100 if args.quick else 400, rng).items():
        F = NystromFeatures(random_state=0, device="cpu").fit(sets).transform(sets)
        norms = np.concatenate([np.linalg.norm(f, axis=1) for f in F])
        label = f"{name} ({np.median(norms):.1f} / {norms.max():.0f})"
        for eps in (0.5, 0.1):
            est = OTKEmbedding(epsilon=eps, center=False, normalize=False, random_state=0,
                               device="cpu").fit(F)
            ref, _ = raw(est, F, 5000, None)
            for n_iter, tol in SETTINGS:
                out, t = raw(est, F, n_iter, tol)
                err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
                per = (np.linalg.norm(out - ref, axis=1) / np.linalg.norm(ref, axis=1)).max()
                mark = " (default)" if (n_iter, tol) == (default.sinkhorn_iter,
                                                         default.sinkhorn_tol) else ""
                lines.append(f"| {label} | {eps} | {n_iter}{mark} | {tol} | {100 * err:.3f}% | "
                             f"{100 * per:.2f}% | {t:.3f} |")
                print(lines[-1], flush=True)
    if args.out:
        with open(args.out, "a") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
