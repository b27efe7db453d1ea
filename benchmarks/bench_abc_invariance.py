"""Whether ``ABCClusterer.predict`` labels an instance alone as it does among others.

For each model and group of instances, ``predict`` on the whole list is compared, instance by
instance, with ``predict`` on a random split of a random permutation of it (two calls), ten
splits, with the k rule and with a given k. Counts the instance predictions whose labels differ
(any element). Models: the stored circles model (``examples/data/abc_circles_20k.skset``) on
circles instances (200, as ``bench_abc.py circles`` draws its test set) and on structureless
instances (100 sets of 10-59 uniform points); the small blob model of the test suite (120 steps on
instances of 2-4 Gaussian blobs) on 60 unseen blob instances.

    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_abc_invariance.py

Results: ``benchmarks/results/abc.md``.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.datasets import make_blobs  # noqa: E402

import skset  # noqa: E402
from skset.cluster import ABCClusterer  # noqa: E402
from skset.datasets import make_circles_instances  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def blob_model():
    """The test suite's small model (``tests/test_cluster.py``: ``fitted``) and its instances."""
    rng = np.random.RandomState(0)
    X, y = [], []
    for _ in range(160):
        k, n = rng.randint(2, 5), rng.randint(15, 30)
        xi, yi = make_blobs(n, centers=k, cluster_std=0.3, center_box=(-6, 6), random_state=rng)
        X.append(xi)
        y.append(yi)
    model = ABCClusterer(hidden_size=16, n_heads=2, max_steps=120, batch_size=16, eval_every=20,
                         learning_rate_init=3e-3, random_state=0).fit(X[:120], y[:120])
    return model, X[100:160]


def differing(model, X, k, rng, n_splits):
    """Instance predictions (of ``n_splits * len(X)``) whose labels differ from one call."""
    whole = model.predict(X, n_clusters=k)
    bad = 0
    for _ in range(n_splits):
        perm = rng.permutation(len(X))
        cut = int(rng.integers(1, len(X)))
        part = (model.predict([X[i] for i in perm[:cut]], n_clusters=k)
                + model.predict([X[i] for i in perm[cut:]], n_clusters=k))
        bad += sum(not np.array_equal(part[j], whole[i]) for j, i in enumerate(perm))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--splits", type=int, default=10)
    args = ap.parse_args()
    circles = skset.load(ROOT / "examples" / "data" / "abc_circles_20k.skset")
    rng = np.random.default_rng(1)
    Xc, _ = make_circles_instances(200, 100, random_state=1)
    Xu = [rng.uniform(-6, 6, size=(int(rng.integers(10, 60)), 2)) for _ in range(100)]
    blobs, Xb = blob_model()
    print("model, instances, k: instance predictions whose labels differ from one call")
    for name, model, X in (("circles model, circles", circles, Xc),
                           ("circles model, uniform points", circles, Xu),
                           ("blob model, blobs", blobs, Xb)):
        for k in (None, 4):
            bad = differing(model, X, k, rng, args.splits)
            print(f"  {name}, k={'rule' if k is None else k}: {bad} of {args.splits * len(X)}",
                  flush=True)


if __name__ == "__main__":
    main()
