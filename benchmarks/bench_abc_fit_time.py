"""Fit time of ABCClusterer with its defaults on the circles study's training data (issue 25),
under the OpenMP settings of the calling environment (this script does not set
``OMP_WAIT_POLICY``: the fit time depends on it, and the point is to measure the user's).

``full``: one default fit (``bench_abc_seeds.py circles``' data of training seed ``--seed``) on
``--threads`` torch threads, its minutes and its NMI on test draw 0. ``steps``: the steps per
second of the first 1,500 steps of that fit (no warm-up: the constant rate from the start).

    python benchmarks/bench_abc_fit_time.py full --seed 0                # default OpenMP settings
    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_abc_fit_time.py full --seed 0
    for p in PASSIVE ACTIVE; do for t in 1 2; do
        OMP_WAIT_POLICY=$p python benchmarks/bench_abc_fit_time.py steps --threads $t; done; done
    python benchmarks/bench_abc_fit_time.py steps --threads 2            # default settings
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["full", "steps"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = ap.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    policy = os.environ.get("OMP_WAIT_POLICY", "unset")
    import bench_abc_seeds as B  # after torch: its OMP_WAIT_POLICY default comes too late to act

    from skset import ABCClusterer

    X, y, kw = B.train_data("circles", args.seed)
    abc = ABCClusterer(random_state=args.seed, **kw)
    if args.mode == "steps":
        abc.set_params(max_steps=1500, warmup_fraction=0.0)
    t = time.perf_counter()
    abc.fit(X, y)
    s = time.perf_counter() - t
    head = f"OMP_WAIT_POLICY {policy}, {torch.get_num_threads()} threads"
    if args.mode == "steps":
        print(f"{head}: {abc.n_iter_} steps in {s:.1f} s = {abc.n_iter_ / s:.1f} steps/s")
        return
    r = B.evaluate(abc, "circles", 0, B.N_TEST)
    print(f"{head}: seed {args.seed} fit {s / 60:.2f} min, {abc.n_iter_} steps, kernel "
          f"{abc.kernel_mix_}; test draw 0: NMI {r['eg_nmi']:.3f}, k right {r['k_right']:.0%}, "
          f"true-k NMI {r['true_nmi']:.3f}")


if __name__ == "__main__":
    main()
