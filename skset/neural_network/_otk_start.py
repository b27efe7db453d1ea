"""Where :class:`~skset.OTKClassifier`'s ``"auto"`` element map starts.

The supervised OTK models choose their element map by the rule of :class:`~skset.NystromFeatures`
(``skset._map_selection``), from an incumbent that a candidate must beat by more than noise:
the paper's map (``PAPER_MAP`` in ``skset.neural_network._otk``) rather than the pipeline's
fixed choice (``DEFAULT_CHOICE``), since the rule's mean-pooled proxy cannot see what training on
order or positions will find. Neither start held on every data set of the benchmark suite
(``benchmarks/results/suite.md``, "Where the supervised map starts"): from the pipeline's,
DigitPatches rose from 89.7 to 92.9 and ArrowHead 10-mers at seed 0 from 71.4 to 81.7, and
WatchMagnitude lost 8.3 and 13.1 points. So the classifier builds both initial embeddings where
the two choices differ and keeps the pipeline's only when a logistic head on it classifies the
training sets better, out of fold (``START_FOLDS`` stratified folds), by a paired t statistic
over the sets' hits above ``START_MIN_T``. The regressor keeps the paper's start.

The classifier's ``epsilon="auto"`` is chosen by the same test on the start it keeps, embedded at
the paper's ``epsilon=0.5`` and at the pipeline's ``0.1`` (``choose_epsilon``): on the benchmark
suite's point clouds (DigitPoints) the smaller one is kept at every seed (t of 4.1-4.5), on
WatchWindows at two seeds of three, and nowhere else (``benchmarks/results/supervised_otk.md``,
"The classifier's epsilon chosen from its start"). Its ``alpha="auto"`` (:func:`head_alpha`),
which these rules' logistic heads use too, is set here, where the start is built.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.model_selection import StratifiedKFold

from .._map_selection import DEFAULT_CHOICE
from .._stats import beats
from .._weighting import kmer_weights
from ._heads import fit_logistic_head

__all__ = ["PAPER_EPSILON", "PIPELINE_EPSILON", "START_FOLDS", "START_MIN_T", "choose_epsilon",
           "choose_start", "chosen_start", "epsilon_rule_applies", "head_alpha", "map_choice",
           "sync_alpha",
           "start_hits", "start_rule_applies"]

START_FOLDS, START_MIN_T = 5, 2.0
#: ``OTKClassifier``'s ``epsilon="auto"``: the paper's value, unless the pipeline's
#: (``OTKEmbedding``'s default) embeds the start better by the same test as the two starts
PAPER_EPSILON, PIPELINE_EPSILON = 0.5, 0.1


def map_choice(nystrom) -> tuple | None:
    """What a fitted element map chose: preprocessing, bandwidth, k-mer width and dilation (None:
    no map)."""
    if nystrom is None:
        return None
    return (nystrom.standardize_, nystrom.normalize_, nystrom.keep_norm_,
            nystrom.relative_bandwidth_, nystrom.window_, nystrom.dilation_)


def start_rule_applies(est, y) -> bool:
    """Whether ``est`` (a classifier) scores both starts: a Nystrom map with a parameter left
    ``"auto"``, single-label classes (``y``, class indices), at least two, of two sets or more."""
    if not est._use_nystrom or y is None or np.ndim(y) != 1:
        return False
    if all(getattr(est, k) != "auto" for k in (*DEFAULT_CHOICE, "window", "dilation")):
        return False
    return _foldable(y)


def epsilon_rule_applies(est, y) -> bool:
    """Whether ``est`` (a classifier with ``epsilon="auto"``) scores both epsilons: single-label
    classes (``y``), at least two, of two sets or more."""
    return est._chooses_start and est.epsilon == "auto" and y is not None and np.ndim(y) == 1 \
        and _foldable(y)


def _foldable(y) -> bool:
    counts = np.unique(y, return_counts=True)[1]
    return len(counts) > 1 and counts.min() >= 2


def head_alpha(alpha, n_sets: int, sample_weight=None) -> float:
    """The classifier's head penalty: ``alpha``, or for ``"auto"`` one over the ``n_sets``
    training sets of positive ``sample_weight`` (scikit-learn's multinomial
    ``LogisticRegression()``, ``C=1``; on two classes its binomial model at ``C=2``; with
    weights, ``C=1``'s where they average 1: the head's loss is their weighted mean)."""
    if alpha != "auto":
        return float(alpha)
    n = n_sets if sample_weight is None else int((torch.as_tensor(sample_weight) != 0).sum())
    return 1.0 / max(n, 1)


def sync_alpha(est, data, warm: bool) -> None:
    """Before a warm start or a later ``partial_fit`` trains, whatever the solver: ``alpha_``
    follows an ``alpha`` set since the fit (the Adam penalty and the head's refits read it): a
    float as given; ``"auto"`` after a float chosen again on this fit's training part
    (``est._auto_alpha(data)``); ``"auto"`` since the first fit keeps that fit's."""
    if not warm:  # a first fit: chosen_start, or the regressor's first head
        return
    if est.alpha != "auto":
        est.alpha_, est._alpha_given = float(est.alpha), True
    elif getattr(est, "_alpha_given", False):
        est.alpha_, est._alpha_given = est._auto_alpha(data), False


def chosen_start(est, parts, fit, y, sample_weight, masses):
    """The initial ``parts`` of the paper's start after the classifier's rules, each where it
    applies: the pipeline's element map (:func:`choose_start`), then ``epsilon``
    (:func:`choose_epsilon`). ``fit``: the arguments of ``est._initial_map`` after the map's
    incumbent. The other starts draw nothing from the global generators: the fit that follows is
    the same whichever start is kept."""
    for attr in ("start_scores_", "epsilon_scores_"):  # set again where their rules score
        est.__dict__.pop(attr, None)
    if est._is_classifier:
        est.alpha_ = head_alpha(est.alpha, len(fit[0]), fit[2])
        est._alpha_given = est.alpha != "auto"  # "auto" again on a warm start: chosen again
    with torch.random.fork_rng(devices=[est.device_] if est.device_.type == "cuda" else []):
        if est._chooses_start and start_rule_applies(est, y):
            other = est._initial_map(DEFAULT_CHOICE, *fit)
            if map_choice(other[0]) != map_choice(parts[0]):
                other = est._initial_embedding(other, *fit)
                parts = choose_start(est, parts, other, y, sample_weight, masses)
        if epsilon_rule_applies(est, y):
            mapped = parts[:3]
            parts = choose_epsilon(est, parts, lambda eps: est._initial_embedding(
                mapped, *fit, epsilon=eps), y, sample_weight, masses)
    return parts


def choose_start(est, paper, pipeline, y, sample_weight, masses):
    """The initial parts ``(nystrom, window, features, embedding)`` of the paper's start unless
    the pipeline's classify the training sets better by more than noise; sets
    ``est.start_scores_``."""
    hits = start_hits(est, paper, pipeline, y, sample_weight, masses)
    chosen = "pipeline" if beats(hits[1], hits[0], START_MIN_T) else "paper"
    est.start_scores_ = {"paper": float(hits[0].mean()), "pipeline": float(hits[1].mean()),
                         "chosen": chosen}
    if est.verbose:
        print(f"{type(est).__name__}: the {chosen}'s element map (cross-validated accuracy of "
              f"the initial head: paper's {hits[0].mean():.3f}, pipeline's {hits[1].mean():.3f})")
    return pipeline if chosen == "pipeline" else paper


def choose_epsilon(est, parts, rebuild, y, sample_weight, masses):
    """The initial parts ``(nystrom, window, features, embedding)`` at ``PAPER_EPSILON`` unless
    ``rebuild(PIPELINE_EPSILON)`` (the same map and features, the embedding fitted again at that
    epsilon: the same k-means references) classifies the training sets better by more than
    noise, as :func:`choose_start` decides; sets ``est.epsilon_scores_``."""
    other = rebuild(PIPELINE_EPSILON)
    hits = start_hits(est, parts, other, y, sample_weight, masses)
    chosen = PIPELINE_EPSILON if beats(hits[1], hits[0], START_MIN_T) else PAPER_EPSILON
    est.epsilon_scores_ = {str(PAPER_EPSILON): float(hits[0].mean()),
                           str(PIPELINE_EPSILON): float(hits[1].mean()), "chosen": chosen}
    if est.verbose:
        print(f"{type(est).__name__}: epsilon={chosen} (cross-validated accuracy of the initial "
              f"head: {PAPER_EPSILON} {hits[0].mean():.3f}, {PIPELINE_EPSILON} {hits[1].mean():.3f})")
    return other if chosen == PIPELINE_EPSILON else parts


def start_hits(est, paper, pipeline, y, sample_weight=None, masses=None) -> list[np.ndarray]:
    """The out-of-fold hits of two starts (:func:`fold_hits`, ``START_FOLDS`` stratified folds
    drawn from the first embedding's ``random_state``): ``[first's, second's]``."""
    y = np.asarray(y)
    k = min(START_FOLDS, int(np.unique(y, return_counts=True)[1].min()))
    folds = list(StratifiedKFold(k, shuffle=True, random_state=paper[3].random_state)
                 .split(np.zeros(len(y)), y))
    return [fold_hits(parts, y, folds, est._head_alpha(), sample_weight, masses)
            for parts in (paper, pipeline)]


def fold_hits(parts, y, folds, alpha: float, sample_weight=None, masses=None) -> np.ndarray:
    """Whether each set is classified right by a logistic head (penalty ``alpha``, the sets'
    ``sample_weight``) fitted on the other ``folds`` of the initial embedding of ``parts``."""
    nystrom, window, feats, embedding = parts
    ew = None if masses is None else kmer_weights(masses, window,
                                                  1 if nystrom is None else nystrom.dilation_)
    Z = torch.as_tensor(embedding.transform(feats, element_weight=ew), dtype=torch.float64)
    t = torch.as_tensor(np.unique(y, return_inverse=True)[1], dtype=torch.long)
    w = None if sample_weight is None else torch.as_tensor(sample_weight, dtype=torch.float64)
    hits = np.zeros(len(y))
    for tr, te in folds:
        head = torch.nn.Linear(Z.shape[1], int(t.max()) + 1, dtype=torch.float64)
        torch.nn.init.zeros_(head.weight)
        torch.nn.init.zeros_(head.bias)
        fit_logistic_head(head, Z[tr], t[tr], alpha, weight=None if w is None else w[tr])
        with torch.no_grad():
            hits[te] = (head(Z[te]).argmax(1) == t[te]).numpy()
    return hits
