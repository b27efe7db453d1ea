"""float32 estimators on features far from zero: the same sets shifted by an offset against the
sets at 0.

Forty sets of 5-29 elements of 3 standard normal features, shifted by ``offset`` in every
feature (in float64, before skset reads them), then fitted and transformed in float32 by each
estimator with defaults but for the sizes below. The printed figure is the largest absolute
difference between the output of the shifted sets and that of the sets at 0, beside the range of
the output at 0 (the largest absolute value): the estimators read differences of features (a
Gaussian kernel) or plans invariant to a shared shift of sets and references (OTK), so in exact
arithmetic every difference is 0 and what is printed is float32's rounding.

    cd benchmarks && python bench_offsets.py
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import warnings  # noqa: E402

import numpy as np  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402

OFFSETS = [0.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6]


def estimators():
    return {
        "OTKEmbedding": lambda: OTKEmbedding(n_supports=4, random_state=0),
        "OTKEmbedding(normalize=False)": lambda: OTKEmbedding(n_supports=4, normalize=False,
                                                              random_state=0),
        "NystromFeatures": lambda: NystromFeatures(n_components=16, random_state=0),
    }


def output(est, sets):
    out = est.fit(sets).transform(sets)
    return np.concatenate(list(out)) if isinstance(out, list) else np.asarray(out)


def main():
    rng = np.random.default_rng(0)
    base = [rng.normal(size=(int(n), 3)) for n in rng.integers(5, 30, 40)]
    print("| estimator | range at 0 | " + " | ".join(f"{o:g}" for o in OFFSETS[1:]) + " |")
    print("|---|---:|" + "---:|" * (len(OFFSETS) - 1))
    for name, make in estimators().items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = output(make(), base)
            diffs = [np.abs(output(make(), [b + off for b in base]) - ref).max()
                     for off in OFFSETS[1:]]
        print(f"| {name} | {np.abs(ref).max():.3g} | " + " | ".join(f"{d:.2g}" for d in diffs)
              + " |")


if __name__ == "__main__":
    main()
