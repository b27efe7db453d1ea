"""How often ``NystromFeatures(window="auto")`` takes k-mers where the order of a set's rows
carries nothing, under the width rule and under the rule it replaced.

``N`` unordered labelled bags, each draw its own: 40 to 200 sets of 10 to 60 i.i.d. elements,
1 to 8 features, 2 or 3 classes whose elements differ in mean (a shift of 0.3-1 standard
deviation along a random direction). ``NystromFeatures(window="auto", random_state=draw)`` is
fitted on each; the proxy's per-set errors of every candidate width are read as the rule computes
them, and both rules are applied to them: the width of lowest mean error if it beats single
elements by more than noise (before 2026-11-26), and the width of lowest mean error among those
that beat single elements by more than noise (since).

    cd benchmarks
    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python bench_window_rule.py --bags 400
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

import skset._map_selection as ms  # noqa: E402
from skset import NystromFeatures  # noqa: E402
from skset._stats import beats  # noqa: E402


def draw(seed):
    rng = np.random.RandomState(seed)
    n, d, k = rng.randint(40, 201), rng.randint(1, 9), rng.randint(2, 4)
    shift = rng.normal(size=(k, d))
    shift *= rng.uniform(0.3, 1.0) / np.linalg.norm(shift, axis=1, keepdims=True)
    y = rng.randint(k, size=n)
    X = [rng.normal(size=(rng.randint(10, 61), d)) + shift[c] for c in y]
    return X, y


def rules(X, y, seed):
    """(the rule before, the rule since) on the errors of one fit."""
    errs, orig = [], ms.pooled_map_errors

    def spy(*a, **k):
        errs.append(orig(*a, **k))
        return errs[-1]

    ms.pooled_map_errors = spy
    try:
        nys = NystromFeatures(window="auto", random_state=seed).fit(X, y)
    finally:
        ms.pooled_map_errors = orig
    widths = ms.window_candidates([len(x) for x in X])
    errs = errs[:len(widths)]  # the width rule scores first, then the map is chosen
    best = min(range(len(widths)), key=lambda i: errs[i].mean())
    before = widths[best] if best and beats(errs[0], errs[best], ms.MIN_T, flat=0.0) else 1
    passing = [i for i in range(1, len(widths)) if beats(errs[0], errs[i], ms.MIN_T, flat=0.0)]
    since = widths[min(passing, key=lambda i: errs[i].mean())] if passing else 1
    assert since == nys.window_ or nys.dilation_ > 1  # or a dilated pair past the order test
    return before, since


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bags", type=int, default=400)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    t0, before, since = time.perf_counter(), [], []
    for seed in range(args.bags):
        b, s = rules(*draw(seed), seed)
        before.append(b)
        since.append(s)
    before, since = np.array(before), np.array(since)
    print(f"{args.bags} unordered bags ({time.perf_counter() - t0:.0f} s): k-mers taken on "
          f"{int((before > 1).sum())} with the rule before, {int((since > 1).sum())} with the "
          f"rule since; draws where they differ: {np.flatnonzero(before != since).tolist()}")


if __name__ == "__main__":
    main()
