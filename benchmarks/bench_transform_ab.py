"""Wall time of ``OTKEmbedding.transform`` on S1 (512 sets x 100 x 128, 64 supports, epsilon 0.5,
10 iterations), 1 and 2 torch threads, min and median of 11: for A/B runs of two checkouts.

Run (alternate the checkouts, two rounds each; ``git worktree add /tmp/old <commit>``)::

    for r in /tmp/old . /tmp/old .; do
        OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_transform_ab.py --root $r
    done
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--root", default=".", help="checkout whose skset is timed")
    p.add_argument("--repeats", type=int, default=11)
    args = p.parse_args()
    sys.path.insert(0, os.path.abspath(args.root))
    sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
    import numpy as np
    import torch
    from bench_peers import make_sets

    import skset
    from skset import OTKEmbedding

    sets = make_sets(np.random.default_rng(0), [100] * 512, 128)
    est = OTKEmbedding(n_supports=64, epsilon=0.5, sinkhorn_iter=10, sinkhorn_tol=None,
                       center=False, normalize=False, random_state=0,
                       max_samples=20_000).fit(sets[:200])
    for threads in (1, 2):
        torch.set_num_threads(threads)
        est.transform(sets)
        ts = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            est.transform(sets)
            ts.append(time.perf_counter() - t0)
        ts.sort()
        print(f"{os.path.dirname(skset.__file__)}: {threads} thread(s): min "
              f"{ts[0] * 1e3:.1f} ms, median {ts[len(ts) // 2] * 1e3:.1f} ms", flush=True)


if __name__ == "__main__":
    main()
