"""Paired test of the suite rows where a default skset model sits under its bar: on the same
test series, how many each of two models gets right that the other gets wrong, and the exact
two-sided sign test (McNemar) of those discordant pairs, per seed.

Pairs (accuracy rows; the ROC AUC rows are not paired here):

* ``ipd``: ItalyPowerDemand as 10-mers, raw mean pooling (``StandardScaler`` +
  ``LogisticRegressionCV``, the suite's ``raw_mean``) against Deep Sets and the Set Transformer
  with defaults;
* ``rocket``: the default pipeline ``NystromFeatures -> OTKEmbedding -> LogisticRegression`` on
  ACSF1 and WatchMagnitude (series given as sets of time points) against aeon's MiniRocket.

    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_paired_gaps.py ipd rocket

Results: ``benchmarks/results/suite.md`` (the rocket pairs) and
``benchmarks/results/trained_vs_pooling.md`` (the ipd pairs).
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from bench_suite import RAW_CS, clf, pool_raw  # noqa: E402
from scipy.stats import binomtest  # noqa: E402
from sklearn.linear_model import LogisticRegressionCV  # noqa: E402
from sklearn.pipeline import Pipeline, make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from suite_data import load, series_for_rocket  # noqa: E402

from skset import (  # noqa: E402
    DeepSetsClassifier,
    NystromFeatures,
    OTKEmbedding,
    SetTransformerClassifier,
)
from skset._sets import kmer_windows  # noqa: E402


def paired(name, a_name, hits_a, b_name, hits_b, seed):
    """Print one pair's accuracies, discordant counts and sign-test p-value."""
    only_a = int((hits_a & ~hits_b).sum())
    only_b = int((hits_b & ~hits_a).sum())
    p = binomtest(only_a, only_a + only_b).pvalue if only_a + only_b else 1.0
    print(f"{name} seed {seed}: {a_name} {100 * hits_a.mean():.1f}, {b_name} {100 * hits_b.mean():.1f}"
          f" ({len(hits_a)} test series); right only by {a_name} {only_a}, only by {b_name} {only_b};"
          f" sign test p = {p:.3f}", flush=True)


def ipd(seeds):
    X_tr, X_te, y_tr, y_te = load("ItalyPowerDemand")
    A, B = kmer_windows(X_tr, 10), kmer_windows(X_te, 10)
    raw = make_pipeline(StandardScaler(), LogisticRegressionCV(Cs=RAW_CS, cv=3, max_iter=1000))
    hits_raw = raw.fit(pool_raw(A, "mean"), y_tr).predict(pool_raw(B, "mean")) == y_te
    for est in (DeepSetsClassifier, SetTransformerClassifier):
        for s in seeds:
            hits = est(random_state=s).fit(A, y_tr).predict(B) == y_te
            paired("ItalyPowerDemand 10-mers", "raw mean", hits_raw, est.__name__, hits, s)


def rocket(seeds):
    from aeon.classification.convolution_based import MiniRocketClassifier

    for name in ("ACSF1", "WatchMagnitude"):
        X_tr, X_te, y_tr, y_te = load(name)
        R_tr, R_te, ry_tr, ry_te = series_for_rocket(name)
        assert np.array_equal(np.asarray(ry_te), np.asarray(y_te))
        for s in seeds:
            pipe = Pipeline([("nys", NystromFeatures(random_state=s)),
                             ("otk", OTKEmbedding(random_state=s)), ("clf", clf())])
            hits = pipe.fit(X_tr, y_tr).predict(X_te) == np.asarray(y_te)
            mr = MiniRocketClassifier(random_state=s).fit(R_tr, ry_tr).predict(R_te) == np.asarray(y_te)
            paired(name, "pipeline", hits, "MiniRocket", mr, s)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pairs", nargs="+", choices=("ipd", "rocket"))
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    args = ap.parse_args()
    warnings.filterwarnings("ignore", category=UserWarning)
    for pair in args.pairs:
        {"ipd": ipd, "rocket": rocket}[pair](args.seeds)


if __name__ == "__main__":
    main()
