"""Digit patch bags in several forms: the default pipeline against raw mean+max pooling.

``DigitPatches`` (``suite_data.py``) describes each 8x8 patch of an MNIST digit by 157 features
of very different kinds and scales (position, intensity statistics, shape moments, gradient
histograms, intensity histogram, profiles, raw pixels). This script varies what a bag holds and
the task, and runs on each variant and data seed (the split and the patch sample):

* ``raw mean+max``: mean and max of the raw elements + ``StandardScaler`` +
  ``LogisticRegressionCV`` (the suite's ``raw_meanmax`` row);
* ``otk``: ``Pipeline([NystromFeatures(), OTKEmbedding(), LogisticRegression()])`` with defaults
  (the suite's ``otk`` row), ``random_state`` the data seed;

and prints the element statistics of the suite (median bag size, spread of standardised element
distances) with the map the defaults chose.

    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python benchmarks/bench_patch_variants.py --seeds 0 1 2
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from bench_suite import RAW_CS, pool_raw  # noqa: E402
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from suite_data import digit_patches  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402

VARIANTS = {
    "DigitPatches (suite): 500 train, 10 classes": {},
    "200 train": {"n_train": 200},
    "no position features": {"position": False},
    "every patch (36, blank ones too)": {"min_ink": 0},
    "200 train, 2-13 random patches, digit >= 5": {"n_train": 200, "max_patches": 13,
                                                   "binary": True},
}


def spread(X, seed=0):
    """std / mean of the distances of 2,000 random pairs of standardised elements."""
    flat = np.concatenate(X)
    sd = flat.std(0)
    flat = (flat - flat.mean(0)) / np.where(sd > 0, sd, 1.0)
    rng = np.random.RandomState(seed)
    dist = np.linalg.norm(flat[rng.choice(len(flat), 2000)] - flat[rng.choice(len(flat), 2000)],
                          axis=1)
    return float(dist.std() / dist.mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    args = ap.parse_args()
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    print("| variant | d | median n | spread | raw mean+max | otk, defaults | map (seed 0) |")
    print("|---|---|---|---|---|---|---|")
    for name, kw in VARIANTS.items():
        raw, otk, stats, chosen = [], [], None, None
        for seed in args.seeds:
            X_tr, X_te, y_tr, y_te = digit_patches(seed=seed, **kw)
            model = Pipeline([("scale", StandardScaler()), ("clf", LogisticRegressionCV(
                Cs=RAW_CS, cv=3, max_iter=1000))]).fit(pool_raw(X_tr, "meanmax"), y_tr)
            raw.append(model.score(pool_raw(X_te, "meanmax"), y_te))
            nys = NystromFeatures(random_state=seed)
            pipe = Pipeline([("nys", nys), ("otk", OTKEmbedding(random_state=seed)),
                             ("clf", LogisticRegression(max_iter=1000))]).fit(X_tr, y_tr)
            otk.append(pipe.score(X_te, y_te))
            if stats is None:
                stats = (X_tr[0].shape[1], np.median([len(x) for x in X_tr]), spread(X_tr))
                chosen = (f"{'std' if nys.standardize_ else 'raw'}"
                          f"{', sphere' if nys.normalize_ else ''}, bw {nys.relative_bandwidth_}")
        fmt = lambda v: f"{100 * np.mean(v):.1f} ± {100 * np.std(v):.1f}"  # noqa: E731
        print(f"| {name} | {stats[0]} | {stats[1]:.0f} | {stats[2]:.2f} | {fmt(raw)} | "
              f"{fmt(otk)} | {chosen} |", flush=True)


if __name__ == "__main__":
    main()
