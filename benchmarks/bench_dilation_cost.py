"""What choosing the k-mer dilation costs: ``NystromFeatures().fit`` (every default,
``dilation="auto"``) against the same with ``dilation=1``, on suite series where the width rule
takes k-mers (the dilated pairs are scored only then) and on JapaneseVowels (single elements).

Interleaved fits (auto, 1, auto, 1, ...) of seeds 0-2 in one process; per data set the median
time of each and the median of the pair-by-pair ratios, and what each fit took.

    cd benchmarks
    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python bench_dilation_cost.py --repeats 5 \\
        --datasets ArrowHead GunPoint OSULeaf ACSF1 PickupGestureWiimoteZ JapaneseVowels
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import suite_data  # noqa: E402
import torch  # noqa: E402

from skset import NystromFeatures  # noqa: E402


def fit_time(X, y, seed, dilation):
    t = time.perf_counter()
    ny = NystromFeatures(random_state=seed, dilation=dilation).fit(X, y)
    return time.perf_counter() - t, (ny.window_, ny.dilation_)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="*", default=["ArrowHead", "GunPoint", "OSULeaf", "ACSF1",
                                                      "PickupGestureWiimoteZ", "JapaneseVowels"])
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    warnings.filterwarnings("ignore")
    print("| data set | fit, dilation auto (s) | fit, dilation 1 (s) | ratio (median of pairs) | "
          "(window_, dilation_) taken |")
    print("|---|---|---|---|---|")
    for name in args.datasets:
        X, _, y, _ = suite_data.load(name)
        fit_time(X, y, 0, "auto")  # warm-up
        auto, one, taken = [], [], set()
        for _ in range(args.repeats):
            a = o = 0.0
            for seed in args.seeds:
                ta, chosen = fit_time(X, y, seed, "auto")
                to, _ = fit_time(X, y, seed, 1)
                a, o = a + ta, o + to
                taken.add(chosen)
            auto.append(a)
            one.append(o)
        ratio = np.median(np.array(auto) / np.array(one))
        print(f"| {name} | {np.median(auto):.3f} | {np.median(one):.3f} | {ratio:.2f}x | "
              f"{', '.join(f'{w}:{d}' for w, d in sorted(taken))} |", flush=True)


if __name__ == "__main__":
    main()
