"""What :class:`ABCClusterer` chooses on its validation instances after training: the prior of
``input_similarity="auto"``, the kernel kept (the prior, the learned kernel or their sum) and
the rule for the number of clusters (the eigengap, or a count of Laplacian eigenvalues below a
calibrated threshold); and the score that validates the clustering during training."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.metrics import adjusted_rand_score

from .._stats import beats
from .._torch import seed_from_random_state
from ..nn.abc import abc_affinity
from ..nn.spectral import (
    batched_kmeans,
    eigengap_n_clusters,
    laplacian_eigh,
    spectral_cluster,
    spectral_embedding,
    threshold_n_clusters,
)

#: thresholds of the calibrated k rule (``n_clusters_rule="calibrated"``)
THRESHOLDS = (0.02, 0.04, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
              0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)

#: the weights ``(prior, learned)`` of the logits of each kernel that may be kept
MIXES = {"prior": (1.0, 0.0), "learned": (0.0, 1.0), "prior+learned": (1.0, 1.0)}


@dataclass(frozen=True)
class KRule:
    """The bounds of the number of clusters ``k`` (``max_clusters=None``: none) and whether a
    threshold may be calibrated in place of the eigengap."""

    min_clusters: int
    max_clusters: int | None
    calibrate: bool = False

    def n_clusters(self, eigenvalues: torch.Tensor, lengths: torch.Tensor,
                   threshold: float | None) -> torch.Tensor:
        """``k`` per instance from ascending Laplacian eigenvalues: the eigengap
        (``threshold=None``) or the count of eigenvalues below ``threshold``."""
        lo, hi = self.min_clusters, self.max_clusters
        if threshold is None:
            return eigengap_n_clusters(eigenvalues, lengths, hi, lo)
        return threshold_n_clusters(eigenvalues, lengths, threshold, hi, lo)


def eigengap_ari(module, parts: list, rule: KRule, seed: int, device) -> float:
    """The clustering quality a user gets: mean adjusted Rand index of the eigengap clustering
    of the batched labelled instances ``parts`` (ARI, unlike NMI, punishes a ``k`` that is too
    large)."""
    g = torch.Generator(device=device).manual_seed(seed)
    scores = []
    for (Xb, Mb, _), labs in parts:
        A = abc_affinity(module(Xb, Mb), Mb).double()
        pred, _, _ = spectral_cluster(A, Mb, None, max_clusters=rule.max_clusters,
                                      min_clusters=rule.min_clusters, n_init=3, generator=g)
        pred = pred.cpu().numpy()
        scores += [adjusted_rand_score(lab, pred[r, :len(lab)]) for r, lab in enumerate(labs)]
    return float(np.mean(scores))


def labelled_spectra(module, parts: list) -> list:
    """Laplacian eigenpairs (float64), mask, labels and true ``k`` of batched labelled
    instances."""
    out = []
    with torch.no_grad():
        for (Xb, Mb, _), labs in parts:
            A = abc_affinity(module(Xb, Mb), Mb).double()
            w, V = laplacian_eigh(A, Mb)
            kt = torch.tensor([int(lab.max()) + 1 for lab in labs], device=w.device)
            out.append((w, V, Mb, labs, kt))
    return out


def _rule_counts(spectra: list, rule: KRule, threshold: float | None) -> list:
    return [rule.n_clusters(w, M.sum(1), threshold) for w, _, M, _, _ in spectra]


def calibrate_k_rule(spectra: list, rule: KRule) -> tuple[float | None, float]:
    """The k rule that finds the true ``k`` of most calibration instances: the eigengap or a
    count of Laplacian eigenvalues below a threshold of ``THRESHOLDS`` (ties: the eigengap,
    else the middle of the best thresholds; fewer absolute errors break ties in the count).
    Returns ``(threshold or None, fraction of instances with the right k)``."""
    def key(thr):
        ks = _rule_counts(spectra, rule, thr)
        right = sum(int((k == kt).sum()) for k, (*_, kt) in zip(ks, spectra, strict=True))
        err = sum(float((k - kt).abs().sum()) for k, (*_, kt) in zip(ks, spectra, strict=True))
        return right, -err

    n = sum(len(p[3]) for p in spectra)
    rules = {None: key(None)}
    n_k = len(torch.unique(torch.cat([p[4] for p in spectra])))
    # a threshold is calibrated only on instances of several k (held-out classes of a small
    # pool give instances of one k, on which any rule that always says that k would win)
    if rule.calibrate and n_k >= 2:
        for thr in THRESHOLDS:
            rules[float(thr)] = key(float(thr))
    best = max(rules.values())
    if rules[None] == best:
        return None, best[0] / max(n, 1)
    tied = sorted(t for t, v in rules.items() if t is not None and v == best)
    return tied[len(tied) // 2], best[0] / max(n, 1)


def calibrated_score(module, parts: list, rule: KRule, seed: int, device,
                     cal_parts: list | None = None) -> tuple[float, float | None, float]:
    """Calibrate the k rule (on ``cal_parts``, else on ``parts``) and score the clustering of
    ``parts`` with it: ``(mean ARI, threshold or None, fraction of calibration instances with
    the right k)``."""
    scores, thr, k_right = calibrated_scores(module, parts, rule, seed, device, cal_parts)
    return float(np.mean(scores)), thr, k_right


def calibrated_scores(module, parts: list, rule: KRule, seed: int, device,
                      cal_parts: list | None = None, true_k: bool = False):
    """:func:`calibrated_score` with the ARI of every instance of ``parts``: ``(ARIs, threshold
    or None, fraction right)``; ``true_k``: also the ARIs of the clustering with the true ``k``
    of each instance, ``(ARIs, true-k ARIs, threshold, fraction right)``."""
    spectra = labelled_spectra(module, parts)
    cal = spectra if cal_parts is None else labelled_spectra(module, cal_parts)
    thr, k_right = calibrate_k_rule(cal, rule)
    g = torch.Generator(device=device).manual_seed(seed)
    scores, exact = [], []
    for (_, V, M, labs, kt), k in zip(spectra, _rule_counts(spectra, rule, thr), strict=True):
        for ks, out in ((k, scores), (kt, exact))[: 2 if true_k else 1]:
            pred, _ = batched_kmeans(spectral_embedding(V, M, ks), M, ks, n_init=3, generator=g)
            pred = pred.cpu().numpy()
            out += [adjusted_rand_score(lab, pred[r, :len(lab)]) for r, lab in enumerate(labs)]
    if true_k:
        return np.asarray(scores), np.asarray(exact), thr, k_right
    return np.asarray(scores, dtype=np.float64), thr, k_right


#: a learned kernel replaces the prior only when its validation ARI is higher by more than the
#: noise of the validation instances: a paired t statistic above this
MIN_PAIRED_T = 2.0


def prior_candidates(n_neighbors: int) -> list[tuple]:
    """``(input_similarity, n_neighbors, scale, offset)`` of the ``"auto"`` candidates (the
    kNN graph of ``n_neighbors`` first: it wins ties)."""
    k = int(n_neighbors)
    knn = [("knn", m, 12.0, -0.5) for m in dict.fromkeys((k, max(1, k // 2), 2 * k))]
    rbf = [("rbf", k, float(a), b) for a in (4, 8, 16, 32) for b in (0.0, 0.5)]
    return knn + rbf


def prior_name(candidate: tuple) -> str:
    sim, n_neighbors, scale, offset = candidate
    if sim == "knn":
        return f"knn(n_neighbors={n_neighbors})"
    return f"rbf(scale={scale:g}, offset={offset:g})"


def set_prior(module, sim: str, n_neighbors: int, scale: float, offset: float) -> None:
    """Make ``sim`` with these settings the prior of :class:`skset.nn.ABCKernel` ``module``."""
    module.input_similarity, module.n_neighbors = sim, int(n_neighbors)
    module.sim_log_scale.fill_(float(np.log(scale)))
    module.sim_offset.fill_(float(offset))


def score_priors(module, mix: torch.Tensor, parts: list, candidates: list, rule: KRule,
                 seed: int, device) -> dict:
    """Per candidate prior alone, the score of every instance of ``parts``: the mean of its ARI
    with its own calibrated k rule and its ARI with the true k (a prior serves both a user who
    lets ``k`` be found and one who gives it). ``module`` is left with the last candidate,
    ``mix`` as it was."""
    saved = mix.clone()
    mix.copy_(torch.tensor(MIXES["prior"], device=mix.device))
    scores = {}
    for cand in candidates:
        set_prior(module, *cand)
        found, exact, _, _ = calibrated_scores(module, parts, rule, seed, device, true_k=True)
        scores[cand] = 0.5 * (found + exact)
    mix.copy_(saved)
    return scores


def choose_prior(scores: dict) -> tuple:
    """The best kNN graph, unless the best RBF kernel scores higher by a paired t above
    ``MIN_PAIRED_T`` (``scores``: per-instance scores of each candidate). A kNN graph depends on
    the ranks of distances only; an RBF's sharpness is a scale, which can transfer badly to
    unseen classes (on MNIST digits a sharpness that clustered the training classes as well as
    a kNN graph clustered the unseen ones far worse)."""
    def best(kind):
        cands = [c for c in scores if c[0] == kind]
        return max(cands, key=lambda c: float(np.mean(scores[c]))) if cands else None

    knn, rbf = best("knn"), best("rbf")
    if knn is None or (rbf is not None and beats(scores[rbf], scores[knn], MIN_PAIRED_T)):
        return rbf
    return knn


class KernelSelection:
    """The choices of :class:`ABCClusterer` after training, recorded in its fitted attributes
    (``input_similarity_``, ``prior_params_``, ``prior_scores_``, ``kernel_mix_``,
    ``kernel_scores_``, ``eigen_threshold_``, ``validation_k_right_``)."""

    def _max_k(self):
        """The bound of the eigengap: ``max_clusters``, or the largest training k (at least
        ``min_clusters``: a learnt bound never undercuts the one given)."""
        if self.max_clusters is not None:
            return int(self.max_clusters)
        learnt = getattr(self, "max_clusters_", None)  # None for models fitted before it existed
        return None if learnt is None else max(int(learnt), int(self.min_clusters))

    def _min_k(self):
        """The lower bound of ``k``: ``min_clusters``."""
        return int(self.min_clusters)

    def _k_rule(self) -> KRule:
        calibrate = self.n_clusters_rule == "calibrated"
        return KRule(self._min_k(), self._max_k(), calibrate)

    def _prior_candidates(self):
        return prior_candidates(self.n_neighbors)

    def _set_prior(self, sim, n_neighbors, scale, offset):
        set_prior(self.module_, sim, n_neighbors, scale, offset)
        self._record_prior()

    def _record_prior(self):
        net = self.module_
        sim = getattr(net, "input_similarity", None)
        self.input_similarity_ = sim
        self.prior_params_ = None if sim is None else {
            "n_neighbors": int(net.n_neighbors), "scale": float(net.sim_log_scale.exp()),
            "offset": float(net.sim_offset)}
        self.prior_scores_ = None

    def _choose_prior(self, mix, parts, cal_parts=None):
        """``input_similarity="auto"``: keep the candidate prior that, alone and with its own
        calibrated k rule, clusters the validation instances best. The prior learns nothing,
        so with a pool it is scored on ``cal_parts`` (instances of every class, several k)."""
        parts = cal_parts if cal_parts is not None else parts
        if parts is None or mix is None:
            return
        seed = seed_from_random_state(self.random_state)
        self.module_.eval()
        scores = score_priors(self.module_, mix, parts, self._prior_candidates(),
                              self._k_rule(), seed, self.device_)
        self._set_prior(*choose_prior(scores))
        self.prior_scores_ = {prior_name(c): float(np.mean(v)) for c, v in scores.items()}

    def _choose_mix(self, mix, parts, prior_cal_parts=None):
        """Keep the kernel (prior alone, learned alone, or both) and the k rule that validate
        best. ``prior_cal_parts``: instances of any class of a pool, which calibrate the k rule
        of the prior alone (it learned from no class) when the held-out classes are too few to
        give instances of several k."""
        seed = seed_from_random_state(self.random_state)
        self.eigen_threshold_ = None
        if parts is None:
            if mix is not None:
                mix.copy_(torch.tensor(MIXES["prior+learned"], device=mix.device))
                self.kernel_mix_, self.kernel_scores_ = "prior+learned", None
            return
        self.module_.eval()
        net, rule, dev = self.module_, self._k_rule(), self.device_
        if mix is None:
            score, self.eigen_threshold_, self.validation_k_right_ = calibrated_score(
                net, parts, rule, seed, dev)
            self.best_validation_score_ = score
            return
        scores, rules, per = {}, {}, {}
        for name, w in MIXES.items():
            mix.copy_(torch.tensor(w, device=mix.device))
            cal = prior_cal_parts if name == "prior" else None
            per[name], *rules[name] = calibrated_scores(net, parts, rule, seed, dev, cal)
            scores[name] = float(per[name].mean())
        best = max(scores, key=scores.get)  # ties: the first, the prior
        # the validation instances are few (and with a small pool, of one pair of held-out
        # classes): a learned kernel is kept only when it wins by more than their noise
        if best != "prior" and not beats(per[best], per["prior"], MIN_PAIRED_T):
            best = "prior"
        mix.copy_(torch.tensor(MIXES[best], device=mix.device))
        self.kernel_mix_, self.kernel_scores_ = best, scores
        self.eigen_threshold_, self.validation_k_right_ = rules[best]
        self.best_validation_score_ = scores[best]
