"""The input check every estimator runs (``skset._sets.check_sets``) and the call it is most of
on many small sets (``NystromFeatures.transform``), for the checkout given (``--root``, a
directory holding a ``skset`` package) so that two versions can be timed side by side: 50,000
sets of 1-4 elements, 5,000 of 5-50 and 200 of 1,000 (8 float64 features; with ``--window W``
the map reads W-mers, the smallest sets hold W to W + 3 elements and the k-mers' level + shape
coding is timed too), median of seven interleaved rounds after a warm-up
(``benchmarks/_timing.py``), one thread::

    for r in /tmp/old . /tmp/old .; do
        OMP_NUM_THREADS=1 python benchmarks/bench_check_sets.py --root $r
    done

Results: ``results/otk_transform.md``, "The input check in runs of small sets".
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import sys  # noqa: E402

from _timing import interleaved  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=".", help="checkout whose skset is timed")
    ap.add_argument("--window", type=int, default=1,
                    help="k-mer width of the map (> 1: its level + shape coding timed too)")
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.root))
    import numpy as np
    import torch

    from skset import NystromFeatures
    from skset._sets import check_sets, kmer_level_shape

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    low = max(1, args.window)  # sets of at least one k-mer
    data = {"tiny": [rng.normal(size=(int(n), 8)) for n in rng.integers(low, low + 4, 50_000)],
            "small": [rng.normal(size=(int(n), 8)) for n in rng.integers(5, 51, 5_000)],
            "long": [rng.normal(size=(1000, 8)) for _ in range(200)]}
    nys = NystromFeatures(n_components=32, window=args.window, random_state=0).fit(data["small"][:500])
    row = [os.path.abspath(args.root)]
    for name, X in data.items():
        calls = {"check_sets": lambda X=X: check_sets(X, compute_dtype=torch.float32),
                 "transform": lambda X=X: nys.transform(X)}
        if args.window > 1:
            calls["k-mer coding"] = lambda X=X: kmer_level_shape(X, args.window)
        med = interleaved(calls, repeats=7)
        row.append(f"{name}: " + ", ".join(f"{k} {1e3 * v:.1f} ms" for k, v in med.items()))
    print(" | ".join(row))


if __name__ == "__main__":
    main()
