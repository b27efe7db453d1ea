"""``OTKClassifier`` with its defaults against its own start, on the same instances: the
untrained model (the initial embedding, k-means references on the element map the classifier
chooses, and the linear head fitted on it in closed form before any epoch) and the trained one,
from one fit.

    cd benchmarks
    python bench_otk_start.py --runs ArrowHead:set:0 ArrowHead:seq:0 ... --out results/otk_start.jsonl
    python bench_otk_start.py --table results/otk_start.jsonl

``--adam-eps 1e-3``: Adam's ``eps`` raised for the training (steps that scale with small
gradients); ``--incumbent pipeline``: the pipeline's map as the start the paper's must beat (the
start rule's roles swapped). Both are recorded in each line.
``--lr-head``: also the test accuracy of ``LogisticRegression()`` (the pipeline's head) on the
start's embedding (``start_lr_head``).
``--epochs``: each epoch's training loss, test accuracy and test log-loss in the line (``epochs``).
``--params '{"alpha": 0.01}'``: other parameters of the classifier (recorded in each line);
``"alpha": "1/n"`` gives each data set the penalty of scikit-learn's ``LogisticRegression()``
(``C=1``: one over its number of training sets).

A run is ``data set:framing:seed`` (framings as in ``bench_suite.py``: ``set``, the elements as
given; ``seq``, k-mers of ``KINDS[name]["window"]``). Scores are test accuracy (also on the MNIST
bags, where the suite reports ROC AUC); each line also records the test log-loss of both models
(``start_logloss``, ``trained_logloss``) and, with two classes, their test ROC AUC. ``--table``
adds the log-loss columns where the lines hold them. Results: ``results/otk_start*.jsonl``, read in
``results/supervised_otk.md``, section (d).
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import copy  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _records import emit  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.metrics import log_loss, roc_auc_score  # noqa: E402
from suite_data import KINDS, load  # noqa: E402

from skset import OTKClassifier  # noqa: E402
from skset._sets import kmer_windows  # noqa: E402
from skset._stats import beats  # noqa: E402
from skset.neural_network import _otk, _otk_start, _training  # noqa: E402
from skset.neural_network._callbacks import Callback  # noqa: E402


class _KeepStart(OTKClassifier):
    """An ``OTKClassifier`` that keeps a copy of its module as initialised (``start_module``);
    with ``watch=(X, y)``, the test accuracy and log-loss of the module at the end of each
    epoch, beside that epoch's training loss (``epochs``; slower: one pass over ``X`` an epoch)."""

    watch = None

    def _init_module(self, *args, **kwargs):
        module = super()._init_module(*args, **kwargs)
        self.start_module = copy.deepcopy(module)
        self.epochs = []
        return module

    def _training_setup(self, data, warm):
        setup = super()._training_setup(data, warm)
        if self.watch is not None:
            setup.callbacks.append(_Watch(self))
        return setup


class _Watch(Callback):
    def __init__(self, est):
        self.est = est

    def on_epoch_end(self, state):
        est, (X, y) = self.est, self.est.watch
        module, was = state.module, state.module.training
        kept, est.module_ = getattr(est, "module_", None), module
        module.eval()
        with torch.no_grad():
            scores = _proba_scores(est, X, y, "test")
            acc = float(np.mean(est.predict(X) == y))
        module.train(was)
        est.module_ = kept
        est.epochs.append([round(float(state.epoch_loss), 5), round(acc, 4),
                           round(scores["test_logloss"], 4)])


def run(name, framing, seed, params=None, epochs=False, lr_head=False):
    X_tr, X_te, y_tr, y_te = load(name)
    if framing == "seq":
        w = KINDS[name]["window"]
        X_tr, X_te = kmer_windows(X_tr, w), kmer_windows(X_te, w)
    params = dict(params or {})
    if params.get("alpha") == "1/n":  # scikit-learn's C=1 for this data set's training sets
        params["alpha"] = 1.0 / len(X_tr)
    t = time.perf_counter()
    m = _KeepStart(random_state=seed, **params)
    m.watch = (X_te, y_te) if epochs else None
    m.fit(X_tr, y_tr)
    elapsed = time.perf_counter() - t
    trained, train_trained = m.score(X_te, y_te), m.score(X_tr, y_tr)
    extra = _proba_scores(m, X_te, y_te, "trained")
    m.module_ = m.start_module
    extra.update(_proba_scores(m, X_te, y_te, "start"))
    if lr_head:  # the pipeline's head (LogisticRegression(), C=1) on the start's embedding
        head = LogisticRegression(max_iter=1000).fit(m.transform(X_tr), y_tr)
        extra["start_lr_head"] = float(head.score(m.transform(X_te), y_te))
    scores = getattr(m, "start_scores_", None)  # where both starts were scored: the one kept
    extra["chosen_start"] = None if scores is None else scores["chosen"]
    if epochs:  # each epoch's [training loss, test accuracy, test log-loss]; the start's training
        # log-loss (the default alternating solver's epoch losses leave out the head's penalty too)
        extra["epochs"] = m.epochs
        extra["start_train_logloss"] = _proba_scores(m, X_tr, y_tr, "x")["x_logloss"]
    return dict(dataset=name, framing=framing, seed=seed, params=params, trained=trained,
                start=m.score(X_te, y_te), train_trained=train_trained,
                train_start=m.score(X_tr, y_tr), window=int(m.window_),
                dilation=int(m.dilation_), n_iter=int(m.n_iter_), time_s=round(elapsed, 1), **extra)


def _proba_scores(model, X, y, prefix):
    """Test log-loss (and ROC AUC with two classes) of ``model``'s probabilities."""
    proba = model.predict_proba(X)
    out = {f"{prefix}_logloss": float(log_loss(y, proba, labels=model.classes_))}
    if len(model.classes_) == 2:
        out[f"{prefix}_auc"] = float(roc_auc_score(y == model.classes_[1], proba[:, 1]))
    return out


def table(paths):
    """Mean test accuracy (%) of the start and the trained model per row, the seeds' pairs in
    brackets, and the count of seeds where training lowered / raised the score; where every
    line of a row holds them, the mean test log-loss of both and the seeds where training
    lowered it (``-`` otherwise)."""
    rows = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                rows.setdefault((r["dataset"], r["framing"]), {})[r["seed"]] = r
    lines = ["| data set | framing | seeds | start | trained | change | each seed (start -> trained) "
             "| log-loss start -> trained | seeds with a lower log-loss |",
             "|---|---|---|---:|---:|---:|---|---|---:|"]
    down = up = ll_down = ll_up = 0
    for (name, fr), seeds in rows.items():
        recs = [seeds[s] for s in sorted(seeds)]
        st = np.array([100 * r["start"] for r in recs])
        tr = np.array([100 * r["trained"] for r in recs])
        down += int((tr < st - 1e-9).sum())
        up += int((tr > st + 1e-9).sum())
        each = ", ".join(f"{a:.1f} -> {b:.1f}" for a, b in zip(st, tr))
        ll, lower = "-", "-"
        if all("trained_logloss" in r for r in recs):
            a = np.array([r["start_logloss"] for r in recs])
            b = np.array([r["trained_logloss"] for r in recs])
            ll, lower = f"{a.mean():.3f} -> {b.mean():.3f}", f"{int((b < a).sum())} of {len(b)}"
            ll_down, ll_up = ll_down + int((b < a).sum()), ll_up + int((b > a).sum())
        lines.append(f"| {name} | {fr} | {','.join(map(str, sorted(seeds)))} | {st.mean():.1f} | "
                     f"{tr.mean():.1f} | {tr.mean() - st.mean():+.1f} | {each} | {ll} | {lower} |")
    lines += ["", f"Fits where training raised the test score: {up}; lowered it: {down}."]
    if ll_down + ll_up:
        lines.append(f"Fits where training lowered the test log-loss: {ll_down}; raised it: {ll_up}.")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", nargs="*", default=[], metavar="NAME:FRAMING:SEED")
    ap.add_argument("--params", default="{}", help="JSON OTKClassifier parameters")
    ap.add_argument("--out", help="JSON lines appended here")
    ap.add_argument("--table", nargs="+", metavar="JSONL")
    ap.add_argument("--epochs", action="store_true",
                    help="record each epoch's training loss, test accuracy and test log-loss")
    ap.add_argument("--lr-head", action="store_true",
                    help="also score LogisticRegression() (C=1) on the start's embedding")
    ap.add_argument("--adam-eps", type=float, default=None,
                    help="Adam's eps for the training (torch's default 1e-8 otherwise)")
    ap.add_argument("--incumbent", choices=("paper", "pipeline"), default="paper",
                    help="the start kept unless the other beats it by the start rule's paired t")
    args = ap.parse_args()
    if args.table:
        print(table(args.table))
        return
    warnings.filterwarnings("ignore")
    variant = {}
    if args.adam_eps is not None:
        _set_adam_eps(args.adam_eps)
        variant["adam_eps"] = args.adam_eps
    if args.incumbent == "pipeline":
        _otk.choose_start = _pipeline_incumbent
        variant["incumbent"] = "pipeline"
    for spec in args.runs:
        name, framing, seed = spec.split(":")
        emit({**run(name, framing, int(seed), json.loads(args.params), args.epochs, args.lr_head),
              **variant}, args.out)


def _set_adam_eps(eps):
    """Train with Adam's ``eps`` at ``eps`` (the training loop's optimizer factory, wrapped)."""
    make = _training.make_optimizer

    def make_optimizer(*args, **kwargs):
        opt = make(*args, **kwargs)
        for group in opt.param_groups:
            group["eps"] = eps
        return opt

    _training.make_optimizer = make_optimizer


def _pipeline_incumbent(est, paper, pipeline, y, sample_weight, masses):
    """``choose_start`` with the roles swapped: the pipeline's start is kept unless the paper's
    out-of-fold hits beat it by a paired t above ``START_MIN_T``."""
    hits = _otk_start.start_hits(est, paper, pipeline, y, sample_weight, masses)
    chosen = "paper" if beats(hits[0], hits[1], _otk_start.START_MIN_T) else "pipeline"
    est.start_scores_ = {"paper": float(hits[0].mean()), "pipeline": float(hits[1].mean()),
                         "chosen": chosen}
    return paper if chosen == "paper" else pipeline


if __name__ == "__main__":
    main()
