"""How often ``NystromFeatures``' k-mer rule (``window="auto"``, ``dilation="auto"``) reads
k-mers in sets whose order carries nothing: labelled bags of i.i.d. elements, each draw its own
(40 to 200 sets of 60 to 300 elements, so that every dilated pair fits; 1 to 8 features; 2 or 3
classes that move the elements' mean and scale).

    cd benchmarks
    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python bench_window_null.py --draws 100

Prints one JSON line: the draws, and how many took contiguous k-mers and how many dilated ones.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

from skset import NystromFeatures  # noqa: E402


def draw_bags(draw):
    """One draw's unordered labelled bags ``(X, y)``."""
    rng = np.random.default_rng(draw)
    n_sets, d, k = int(rng.integers(40, 201)), int(rng.integers(1, 9)), int(rng.integers(2, 4))
    y = np.arange(n_sets) % k
    shift, scale = rng.normal(size=(k, d)), rng.uniform(0.5, 1.5, size=(k, d))
    X = [0.6 * shift[c] + scale[c] * rng.normal(size=(int(rng.integers(60, 301)), d)) for c in y]
    return X, y


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=100)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    contiguous = dilated = 0
    for draw in range(args.draws):
        X, y = draw_bags(draw)
        ny = NystromFeatures(n_components=64, random_state=draw).fit(X, y)
        contiguous += ny.window_ > 1 and ny.dilation_ == 1
        dilated += ny.window_ > 1 and ny.dilation_ > 1
    print(json.dumps({"draws": args.draws, "contiguous_kmers": int(contiguous),
                      "dilated_kmers": int(dilated)}))


if __name__ == "__main__":
    main()
