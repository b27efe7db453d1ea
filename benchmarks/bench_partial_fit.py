"""Fitting by chunks (``partial_fit``) against ``fit`` on Japanese Vowels (issue 24).

The standard train/test split (270 / 370 utterances). The training sets are shuffled (seeded)
and cut into ``--chunks`` chunks; a stream is ``--epochs`` passes over the chunks, each chunk fed
to :func:`skset.utils.partial_fit` (every step of a pipeline updated on it, then transforming it
for the next step). Compared, per seed, test accuracy:

(a) the OTK pipeline ``NystromFeatures -> OTKEmbedding -> SGDClassifier(log_loss)``: by a stream
    of ``partial_fit``; by ``fit`` (the same pipeline); the README pipeline with
    ``LogisticRegression(max_iter=2000)`` by ``fit``; and a stream whose maps (Nystrom anchors,
    OTK references) learn only during the first pass and are then frozen (only the classifier
    keeps learning), to separate the two effects;
(b) ``OTKClassifier()`` by a stream of ``partial_fit`` (``--otk-epochs`` passes: one
    ``partial_fit`` call is one epoch over its chunk) against ``fit`` (``max_iter=50``).

    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_partial_fit.py \\
        --seeds 0 1 2 --out benchmarks/results/partial_fit.json
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.linear_model import LogisticRegression, SGDClassifier  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402
from skset.datasets import load_japanese_vowels  # noqa: E402
from skset.neural_network import OTKClassifier  # noqa: E402
from skset.utils import partial_fit  # noqa: E402


def pipeline(seed, final):
    return Pipeline([("nystrom", NystromFeatures(random_state=seed)),
                     ("otk", OTKEmbedding(random_state=seed)), ("clf", final)])


def sgd(seed):
    return SGDClassifier(loss="log_loss", random_state=seed)


def chunks(X, y, n_chunks, seed):
    order = np.random.default_rng(seed).permutation(len(X))
    return [([X[i] for i in part], y[part]) for part in np.array_split(order, n_chunks)]


def stream(est, parts, epochs, classes, freeze_maps=False):
    for epoch in range(epochs):
        for Xc, yc in parts:
            if freeze_maps and epoch > 0:  # only the classifier keeps learning
                est[-1].partial_fit(est[:-1].transform(Xc), yc, classes=classes)
            else:
                partial_fit(est, Xc, yc, classes=classes)
    return est


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def run(seed, args, data):
    X, y, Xt, yt = data
    classes = np.unique(y)
    parts = chunks(X, y, args.chunks, seed)
    res = {}
    models = {
        "pipe_sgd_fit": lambda: pipeline(seed, sgd(seed)).fit(X, y),
        "pipe_lr_fit": lambda: pipeline(seed, LogisticRegression(max_iter=2000)).fit(X, y),
        "pipe_sgd_stream": lambda: stream(pipeline(seed, sgd(seed)), parts, args.epochs, classes),
        "pipe_sgd_stream_frozen_maps": lambda: stream(pipeline(seed, sgd(seed)), parts,
                                                      args.epochs, classes, freeze_maps=True),
        "otkc_fit": lambda: OTKClassifier(random_state=seed).fit(X, y),
        "otkc_stream": lambda: stream(OTKClassifier(random_state=seed), parts, args.otk_epochs,
                                      classes),
    }
    for name, make in models.items():
        if args.only and name not in args.only:
            continue
        model, secs = timed(make)
        res[name] = {"accuracy": float(np.mean(model.predict(Xt) == yt)), "seconds": secs}
        print(f"seed {seed} {name}: {100 * res[name]['accuracy']:.2f} ({secs:.1f} s)",
              flush=True)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--chunks", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=5, help="passes for the pipeline stream")
    ap.add_argument("--otk-epochs", type=int, default=50, help="passes for OTKClassifier")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    X, y = load_japanese_vowels(subset="train", return_X_y=True)
    Xt, yt = load_japanese_vowels(subset="test", return_X_y=True)
    data = (X, np.asarray(y), Xt, np.asarray(yt))
    out = {"args": vars(args), "seeds": {}}
    for seed in args.seeds:
        out["seeds"][seed] = run(seed, args, data)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(out, f, indent=1)
    names = sorted({k for r in out["seeds"].values() for k in r})
    print("\n| model | test accuracy, mean +- std | per seed | seconds (median) |\n|---|---|---|---|")
    for name in names:
        acc = [100 * r[name]["accuracy"] for r in out["seeds"].values() if name in r]
        sec = [r[name]["seconds"] for r in out["seeds"].values() if name in r]
        print(f"| {name} | {np.mean(acc):.2f} +- {np.std(acc):.2f} | "
              f"{', '.join(f'{a:.2f}' for a in acc)} | {np.median(sec):.1f} |")


if __name__ == "__main__":
    main()
