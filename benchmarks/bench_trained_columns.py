"""A trained model's column of the real-data suite, or the raw-pooling rows, with
estimator parameters given as JSON: one JSON line per data set and framing as each lands.

    python benchmarks/bench_trained_columns.py --model ds --label ds_skip \\
        --params '{"pooled_skip": true}' --out rows.jsonl
    python benchmarks/bench_trained_columns.py --model raw --label raw --out rows.jsonl
    python benchmarks/bench_trained_columns.py --table rows.jsonl     # the markdown table

``--averaging`` and ``--dropout P`` probe two regularisers, through hooks on the same
estimators (the Set Transformer estimators have since taken dropout as the parameter ``dropout``,
``--params '{"dropout": 0.1}'``, whose masks come from a generator seeded inside ``fit``: other
masks than the hook's): the weights averaged along training (polynomial-decay averaging,
``avg += (w - avg) * 9 / (t + 10)`` after optimizer step ``t``, the average loaded at the end),
and dropout with rate ``P`` (Set Transformer: on each block's feed-forward output; Deep Sets:
after each ReLU), active in training only, its masks drawn from torch's global generator seeded
with ``--seed`` before each fit.

``--blend`` also scores the mean of the network's class probabilities and those of raw mean+max
pooling (the ``raw_meanmax`` row's model), row ``<model>_blend``: a late fusion with the
baseline the networks are held to.

``--kmers auto``: in the ``set`` framing, the network reads the k-mers ``NystromFeatures``
would read, width and dilation chosen from the training labels by its rule (``window_``,
``dilation_`` of ``NystromFeatures(random_state=seed)``), coded as level + shape; sets where
the rule keeps single elements are given as they are. ``--framings set`` runs that framing only.

``--pca K``: every element projected on the first ``K`` principal components of the training
elements (scikit-learn's ``PCA``, fitted on the training sets' elements only, not whitened)
before the network reads it: a probe for elements of hundreds of features (the MNIST bags).

Framings as in ``bench_suite.py``: ``set`` (the elements as given) and, for the series and DNA
sets, ``seq`` (k-mers of ``KINDS[name]["window"]``). Models: ``ds`` (``DeepSetsClassifier``),
``st`` (``SetTransformerClassifier``), ``raw`` (mean, and mean and max, of the raw elements +
``StandardScaler`` + ``LogisticRegressionCV``, the suite's ``raw_mean`` / ``raw_meanmax``).
Runs anywhere the suite's data load, also from files (``SKSET_SUITE_DATA``, see
``suite_data.py``) on a machine without the wheels that ship them. Results:
``results/trained_vs_pooling.md``.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from _input_scaling import MODES, install  # noqa: E402
from _records import emit  # noqa: E402
from bench_suite import RAW_CS, pool_raw, score  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402
from sklearn.linear_model import LogisticRegressionCV  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from suite_data import KINDS, load  # noqa: E402
from torch import nn  # noqa: E402

from skset import DeepSetsClassifier, NystromFeatures, SetTransformerClassifier  # noqa: E402
from skset._sets import kmer_level_shape, kmer_windows  # noqa: E402
from skset.neural_network._callbacks import Callback  # noqa: E402

ROWS = ["ItalyPowerDemand", "GunPoint", "ArrowHead", "JapaneseVowels", "BasicMotions",
        "PickupGestureWiimoteZ", "MNISTBags50", "MNISTBags200", "MNISTBags500", "SpokenDigits",
        "WatchWindows", "OSULeaf", "ACSF1", "WatchMagnitude", "DigitPatches", "GeneFamilies"]


class WeightAverage(Callback):
    """Polynomial-decay averaging of the weights: after optimizer step ``t`` (from 1) the
    average moves ``9 / (t + 10)`` of the way to the weights; loaded into the module at the
    end of training."""

    def on_train_begin(self, state):
        self.avg = {k: v.detach().clone() for k, v in state.module.state_dict().items()}
        self.t = 0

    def _update(self, state):
        self.t += 1
        with torch.no_grad():
            for k, v in state.module.state_dict().items():
                if v.dtype.is_floating_point:
                    self.avg[k].lerp_(v, 9.0 / (self.t + 10))
                else:
                    self.avg[k].copy_(v)

    def on_batch_begin(self, state):
        if state.step > 0:
            self._update(state)

    def on_train_end(self, state):
        self._update(state)
        state.module.load_state_dict(self.avg)


def probe_class(model, averaging=False, dropout=0.0):
    """The estimator class of ``model``, with the weight averaging and the dropout of
    ``--averaging`` / ``--dropout`` hooked in where asked."""
    base = DeepSetsClassifier if model == "ds" else SetTransformerClassifier
    if not averaging and not dropout:
        return base

    def drop(mod, inp, out):
        return F.dropout(out, dropout, mod.training)

    class Probe(base):
        def _standard_callbacks(self, validation=None, callbacks=(), early_stopping=None,
                                n_iter_no_change=None):
            cbs = super()._standard_callbacks(validation, callbacks, early_stopping,
                                              n_iter_no_change)
            return [*cbs, WeightAverage()] if averaging else cbs

        def _build_module(self, *args, **kwargs):
            module = super()._build_module(*args, **kwargs)
            for name, sub in module.named_modules() if dropout else ():
                if (name.split(".")[-1] == "ff" if model == "st" else isinstance(sub, nn.ReLU)):
                    sub.register_forward_hook(drop)
            return module

    Probe.__name__ = base.__name__
    return Probe


def raw_pooling(how):
    return Pipeline([("scale", StandardScaler()),
                     ("clf", LogisticRegressionCV(Cs=RAW_CS, cv=3, max_iter=1000))])


class Blend:
    """The mean of two fitted classifiers' probabilities (``--blend``)."""

    def __init__(self, net, pooled, how):
        self.net, self.pooled, self.how = net, pooled, how
        self.classes_ = net.classes_

    def predict_proba(self, X):
        return (self.net.predict_proba(X) + self.pooled.predict_proba(pool_raw(X, self.how))) / 2

    def predict(self, X):
        return self.classes_[self.predict_proba(X).argmax(1)]


class Ensemble:
    """The mean of several fitted classifiers' probabilities (``--ensemble``)."""

    def __init__(self, members):
        self.members = members
        self.classes_ = members[0].classes_

    def predict_proba(self, X):
        return sum(m.predict_proba(X) for m in self.members) / len(self.members)

    def predict(self, X):
        return self.classes_[self.predict_proba(X).argmax(1)]


def project(X_tr, X_te, k):
    """Both splits' elements on the first ``k`` principal components of the training elements."""
    pca = PCA(k, random_state=0).fit(np.concatenate(X_tr))
    return [pca.transform(x) for x in X_tr], [pca.transform(x) for x in X_te]


def fit_rows(model, params, name, X_tr, X_te, y_tr, y_te, seed=0, averaging=False, dropout=0.0,
             blend=False, ensemble=1):
    """``[(row, score, epochs run)]`` of one data set and framing."""
    if model == "raw":
        out = []
        for how in ("mean", "meanmax"):
            m = raw_pooling(how).fit(pool_raw(X_tr, how), y_tr)
            out.append(("raw_" + how, score(m, pool_raw(X_te, how), y_te, name), None))
        return out
    est = probe_class(model, averaging, dropout)
    torch.manual_seed(seed)  # the dropout masks come from torch's global generator
    m = est(random_state=seed, **params).fit(X_tr, y_tr)
    out = [(model, score(m, X_te, y_te, name), int(m.n_iter_))]
    if blend:
        pooled = raw_pooling("meanmax").fit(pool_raw(X_tr, "meanmax"), y_tr)
        out.append((model + "_blend", score(Blend(m, pooled, "meanmax"), X_te, y_te, name),
                    int(m.n_iter_)))
    if ensemble > 1:  # members 1.. seeded seed + 1000 j; member 0 is the fit above
        members = [m] + [est(random_state=seed + 1000 * j, **params).fit(X_tr, y_tr)
                         for j in range(1, ensemble)]
        out.append((f"{model}_ens{ensemble}", score(Ensemble(members), X_te, y_te, name),
                    int(m.n_iter_)))
    return out


def table(paths):
    """The markdown table of JSON-lines files: one row per data set and framing, the better raw
    pooling, then each variant's mean over its seeds (in %; * where under the better raw
    pooling; the seeds' scores in brackets where there are several)."""
    scores, variants = {}, []
    for path in paths:
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                key = (r["dataset"], r["framing"])
                cell = scores.setdefault(key, {})
                if r["row"].startswith("raw_"):  # the better of the two poolings
                    cell["raw"] = max(cell.get("raw", -1.0), 100 * r["score"])
                    continue
                v = r["variant"] + ("_blend" if r["row"].endswith("_blend") else "")
                v += "_" + r["row"].rsplit("_", 1)[1] if "_ens" in r["row"] else ""
                if v not in variants:
                    variants.append(v)
                cell.setdefault(v, {})[r.get("seed", 0)] = 100 * r["score"]
    lines = ["| data set | framing | raw pooling | " + " | ".join(variants) + " |",
             "|---|---|---:|" + "---:|" * len(variants)]
    order = {name: i for i, name in enumerate(ROWS)}
    below = dict.fromkeys(variants, 0)
    for (name, fr), cell in sorted(scores.items(), key=lambda kv: (order.get(kv[0][0], 99),
                                                                     kv[0][1] != "set")):
        raw = cell.get("raw")
        out = []
        for v in variants:
            seeds = cell.get(v)
            if not seeds:
                out.append("-")
                continue
            mean = sum(seeds.values()) / len(seeds)
            under = raw is not None and mean < raw - 1e-9
            below[v] += under
            each = (" (" + ", ".join(f"{seeds[k]:.1f}" for k in sorted(seeds)) + ")"
                    if len(seeds) > 1 else "")
            out.append(f"{mean:.1f}" + ("*" if under else "") + each)
        lines.append(f"| {name} | {fr} | {'-' if raw is None else f'{raw:.1f}'} | "
                     + " | ".join(out) + " |")
    lines.append("")
    lines.append("Rows under the better raw pooling (*): " + ", ".join(
        f"{v} {n}" for v, n in below.items()))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--table", nargs="+", metavar="JSONL",
                    help="print the markdown table of these files and exit")
    ap.add_argument("--model", choices=("ds", "st", "raw"))
    ap.add_argument("--label", help="the variant's name in the JSON lines")
    ap.add_argument("--params", default="{}", help="JSON estimator parameters")
    ap.add_argument("--datasets", nargs="*", default=ROWS)
    ap.add_argument("--seed", type=int, default=0, help="the networks' random_state")
    ap.add_argument("--out", help="JSON lines appended here")
    ap.add_argument("--framings", nargs="*", default=["set", "seq"])
    ap.add_argument("--kmers", choices=("given", "auto"), default="given",
                    help="auto: the set framing read as the k-mers NystromFeatures' rule takes")
    ap.add_argument("--averaging", action="store_true",
                    help="the weights averaged along training (see the module docstring)")
    ap.add_argument("--dropout", type=float, default=0.0, help="dropout rate of the probe")
    ap.add_argument("--blend", action="store_true",
                    help="also score the mean of the network's probabilities and raw mean+max "
                         "pooling's (row <model>_blend)")
    ap.add_argument("--ensemble", type=int, default=1,
                    help="also score the mean probabilities of this many fits of the network, "
                         "seeded seed + 1000 j (row <model>_ens<K>)")
    ap.add_argument("--scaling", choices=MODES, default=None,
                    help="another input scaling for the networks (benchmarks/_input_scaling.py)")
    ap.add_argument("--pca", type=int, default=0, metavar="K",
                    help="elements projected on the training elements' first K principal "
                         "components before the network (0: not)")
    args = ap.parse_args()
    install(args.scaling)
    if args.table:
        print(table(args.table))
        return
    if not (args.model and args.label and args.out):
        ap.error("--model, --label and --out are required to run")
    params = json.loads(args.params)
    warnings.filterwarnings("ignore")
    for name in args.datasets:
        X_tr0, X_te0, y_tr, y_te = load(name)
        w = KINDS[name]["window"]
        for fr in [f for f in (["set", "seq"] if w else ["set"]) if f in args.framings]:
            X_tr, X_te = ((kmer_windows(X_tr0, w), kmer_windows(X_te0, w)) if fr == "seq"
                          else (X_tr0, X_te0))
            t = time.perf_counter()
            if args.pca:
                X_tr, X_te = project(X_tr, X_te, args.pca)
            kmers = None
            if fr == "set" and args.kmers == "auto":
                ny = NystromFeatures(random_state=args.seed).fit(X_tr, y_tr)
                kmers = [int(ny.window_), int(ny.dilation_)]
                if ny.window_ > 1:
                    X_tr, X_te = (kmer_level_shape(X, ny.window_, dilation=ny.dilation_)
                                  for X in (X_tr, X_te))
            for row, value, n_iter in fit_rows(args.model, params, name, X_tr, X_te, y_tr, y_te,
                                               args.seed, args.averaging, args.dropout,
                                               args.blend, args.ensemble):
                rec = dict(dataset=name, framing=fr, row=row, variant=args.label, params=params,
                           seed=args.seed, score=value, n_iter=n_iter,
                           time_s=time.perf_counter() - t, kmers=kmers)
                emit(rec, args.out)


if __name__ == "__main__":
    main()
