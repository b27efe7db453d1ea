"""float32 estimators on features far from zero: the same sets shifted by an offset against the
sets at 0.

Forty sets of 5-29 elements of 3 standard normal features, shifted by ``offset`` in every
feature (in float64, before skset reads them), then fitted and transformed in float32 by each
estimator with defaults but for the sizes below. The printed figure is the largest absolute
difference between the output of the shifted sets and that of the sets at 0, beside the range of
the output at 0 (the largest absolute value): the estimators read differences of features (a
Gaussian kernel) or plans invariant to a shared shift of sets and references (OTK), so in exact
arithmetic every difference is 0 and what is printed is float32's rounding.

Two rows read the shifted sets as a float32 tensor, rounded before any offset is subtracted
(a spread of 1 at 1e4 keeps 1e-3 of it): the layer of ``to_module()`` (its raw embedding less
the fitted mean, as ``transform`` centres it) and the module of
:func:`skset.export.serving_module` (``transform`` as a graph; fitted with
``sinkhorn_tol=None, sinkhorn_iter=200``, a fixed count the graph can repeat).

The second table: the plans no shift leaves as they are (``reg_m``, similarity-scaled
positions), which ``OTKEmbedding`` reads unshifted and, in float32, warns about: the largest
difference between the float32 and the float64 embeddings of the same shifted sets.

    cd benchmarks && python bench_offsets.py
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402
from skset._sets import pack  # noqa: E402
from skset.export import serving_module  # noqa: E402

OFFSETS = [0.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6]


def estimators():
    return {
        "OTKEmbedding": lambda: OTKEmbedding(n_supports=4, random_state=0),
        "OTKEmbedding(normalize=False)": lambda: OTKEmbedding(n_supports=4, normalize=False,
                                                              random_state=0),
        "OTKEmbedding(normalize=False).to_module(), float32 input": Layer,
        "serving_module(OTKEmbedding), float32 input": Served,
        "NystromFeatures": lambda: NystromFeatures(n_components=16, random_state=0),
    }


class Layer:
    """``to_module()`` of an OTKEmbedding(normalize=False) on the sets as a float32 tensor, its
    raw embedding less ``mean_`` (in float64): ``transform``'s output in exact arithmetic."""

    def fit(self, sets):
        self.otk = OTKEmbedding(n_supports=4, normalize=False, random_state=0).fit(sets)
        return self

    def transform(self, sets):
        X, M = pack(sets, dtype=torch.float32)
        with torch.no_grad():
            raw = self.otk.to_module()(X, M).reshape(len(sets), -1).double().numpy()
        return raw - self.otk.mean_


class Served:
    """:func:`skset.export.serving_module` of an OTKEmbedding, on a float32 tensor."""

    def fit(self, sets):
        otk = OTKEmbedding(n_supports=4, sinkhorn_tol=None, sinkhorn_iter=200, random_state=0)
        self.module = serving_module(otk.fit(sets))
        return self

    def transform(self, sets):
        X, M = pack(sets, dtype=torch.float32)
        with torch.no_grad():
            return self.module(X, M)[0].numpy()


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
    precision_table(base)


def precision_table(base):
    print("\n| OTKEmbedding, float32 against float64 | range | " + " | ".join(
        f"{o:g}" for o in OFFSETS) + " |")
    print("|---|---:|" + "---:|" * len(OFFSETS))
    for name, kw in (("reg_m=1.0", {"reg_m": 1.0}),
                     ("position_mode='similarity'", {"position_sigma": 0.5,
                                                     "position_mode": "similarity"})):
        diffs, top = [], 0.0
        for off in OFFSETS:
            far = [b + off for b in base]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                z32 = OTKEmbedding(n_supports=4, random_state=0, **kw).fit(far).transform(far)
                z64 = OTKEmbedding(n_supports=4, random_state=0, dtype="float64",
                                   **kw).fit(far).transform(far)
            diffs.append(np.abs(z32 - z64).max())
            top = max(top, np.abs(z64).max())
        print(f"| {name} | {top:.3g} | " + " | ".join(f"{d:.2g}" for d in diffs) + " |")


if __name__ == "__main__":
    main()
