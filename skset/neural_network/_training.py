"""The one training loop shared by every neural estimator in skset.

Estimators build a ``torch.nn.Module``, say how to compute the loss of one batch and how to cut an
epoch into batches, and hand both to :func:`train_module`, which owns the optimizer, the epochs,
the stopping rules (scikit-learn's ``MLPClassifier`` semantics), the restoring of the best weights,
warm starts and the progress output. Helpers:

* :func:`split_validation` - hold out ``validation_fraction`` of the sets (stratified for
  classifiers) for early stopping;
* :func:`epoch_batches` - length-bucketed batches of set indices for one epoch, shuffled with a
  ``torch.Generator`` (never the global RNG);
* :func:`check_training_params` - validate the MLP-style parameters with clear messages.

A typical estimator ``fit``::

    gen = make_generator(seed)
    train_idx, val_idx = split_validation(len(sets), validation_fraction, y=y, stratify=True,
                                          seed=seed) if early_stopping else (all, None)

    def batches(epoch):
        for idx in epoch_batches(lengths[train_idx], batch_size=..., max_elements=...,
                                 generator=gen):
            X, M = pack([sets[i] for i in train_idx[idx]], device=dev)
            yield X, M, Y[train_idx[idx]]

    def loss_fn(module, batch):
        X, M, Yb = batch
        return F.cross_entropy(module(X, M), Yb), len(Yb)     # (loss, weight)

    result = train_module(module, loss_fn, batches, validation=lambda m: accuracy(m, val),
                          max_iter=..., early_stopping=..., optimizer_state=old_state)
    self.loss_curve_ = result.loss_curve
"""

from __future__ import annotations

import copy
import math
import sys
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

__all__ = [
    "encode_class_targets",
    "encode_regression_targets",
    "TrainResult",
    "train_module",
    "make_optimizer",
    "split_validation",
    "epoch_batches",
    "check_training_params",
]


@dataclass
class TrainResult:
    """What :func:`train_module` returns.

    Attributes
    ----------
    loss_curve : list of float
        Mean training loss of each epoch run in this call (weighted by the batch weights).
    validation_scores : list of float
        The validation score of each epoch (empty without ``validation``).
    n_iter : int
        Epochs run in this call.
    best_score : float or None
        Best validation score (with ``early_stopping``) or lowest training loss seen.
    best_state : dict or None
        ``state_dict`` copy at the best validation score (only with ``early_stopping``); it has
        already been loaded into the module when ``train_module`` returns.
    optimizer_state : dict
        The optimizer's ``state_dict`` at the end, to pass back for a warm start.
    converged : bool
        ``False`` when ``max_iter`` was reached before a stopping rule fired.
    """

    loss_curve: list = field(default_factory=list)
    validation_scores: list = field(default_factory=list)
    n_iter: int = 0
    best_score: float | None = None
    best_state: dict | None = None
    optimizer_state: dict | None = None
    converged: bool = False


def check_training_params(est, *, with_early_stopping: bool = True) -> None:
    """Validate the MLP-style training attributes of an estimator; raise a clear ValueError.

    Looks for ``max_iter``, ``batch_size``, ``learning_rate_init``, ``tol``, ``n_iter_no_change``,
    ``validation_fraction``, ``optimizer``, ``alpha`` / ``weight_decay`` when present.
    """
    name = type(est).__name__

    def _int(attr, low):
        v = getattr(est, attr)
        if isinstance(v, bool) or not isinstance(v, Integral) or v < low:
            raise ValueError(f"{name}: {attr}={v!r} must be an integer >= {low}.")

    def _real(attr, low, high=None, low_open=False, high_open=False):
        v = getattr(est, attr)
        if isinstance(v, bool) or not isinstance(v, Real) or not math.isfinite(v):
            raise ValueError(f"{name}: {attr}={v!r} must be a finite number.")
        if (v <= low if low_open else v < low) or (
            high is not None and (v >= high if high_open else v > high)
        ):
            lo = "(" if low_open else "["
            hi = ")" if high_open else "]"
            raise ValueError(f"{name}: {attr}={v!r} must lie in {lo}{low}, "
                             f"{'inf' if high is None else high}{hi}.")

    if hasattr(est, "max_iter"):
        _int("max_iter", 1)
    if hasattr(est, "batch_size"):
        _int("batch_size", 1)
    if hasattr(est, "learning_rate_init"):
        _real("learning_rate_init", 0.0, low_open=True)
    if hasattr(est, "tol"):
        _real("tol", 0.0)
    if hasattr(est, "n_iter_no_change"):
        _int("n_iter_no_change", 1)
    for attr in ("alpha", "weight_decay"):
        if hasattr(est, attr):
            _real(attr, 0.0)
    if with_early_stopping and hasattr(est, "validation_fraction"):
        _real("validation_fraction", 0.0, 1.0, low_open=True, high_open=True)
    if hasattr(est, "optimizer") and est.optimizer not in ("adam", "adamw"):
        raise ValueError(f"{name}: optimizer={est.optimizer!r} is not supported; use 'adam' or "
                         "'adamw'.")
    if hasattr(est, "verbose"):
        v = est.verbose
        if isinstance(v, bool):
            return
        if not isinstance(v, Integral) or v < 0:
            raise ValueError(f"{name}: verbose={v!r} must be a non-negative integer or a bool.")


def make_optimizer(params, optimizer: str = "adam", learning_rate_init: float = 1e-3,
                   weight_decay: float = 0.0) -> torch.optim.Optimizer:
    """``torch.optim.Adam`` (L2 penalty added to the gradient) or ``AdamW`` (decoupled decay)."""
    if optimizer == "adam":
        return torch.optim.Adam(params, lr=learning_rate_init, weight_decay=weight_decay)
    if optimizer == "adamw":
        return torch.optim.AdamW(params, lr=learning_rate_init, weight_decay=weight_decay)
    raise ValueError(f"optimizer={optimizer!r} is not supported; use 'adam' or 'adamw'.")


def split_validation(
    n_samples: int,
    validation_fraction: float,
    *,
    y=None,
    stratify: bool = False,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Indices ``(train, validation)`` holding out ``validation_fraction`` of the samples.

    With ``stratify=True`` and labels ``y`` the split keeps the class proportions (as scikit-learn's
    MLPClassifier does); when a class is too rare for that it falls back to a plain random split.
    Raises a ValueError when either side would be empty.
    """
    from sklearn.model_selection import train_test_split

    idx = np.arange(n_samples)
    n_val = int(math.ceil(validation_fraction * n_samples))
    if n_val < 1 or n_samples - n_val < 1:
        raise ValueError(f"validation_fraction={validation_fraction} leaves an empty training or "
                         f"validation part with {n_samples} sets; use more sets, a different "
                         "validation_fraction, or early_stopping=False.")
    strat = None
    if stratify and y is not None:
        _, counts = np.unique(np.asarray(y), return_counts=True)
        if counts.min() >= 2 and n_val >= len(counts) and n_samples - n_val >= len(counts):
            strat = y
    tr, va = train_test_split(idx, test_size=n_val, random_state=seed, stratify=strat)
    return np.sort(tr), np.sort(va)


def epoch_batches(
    lengths: np.ndarray,
    *,
    batch_size: int | None,
    max_elements: int | None,
    generator: torch.Generator,
    shuffle: bool = True,
) -> list[np.ndarray]:
    """Length-bucketed batches of indices into ``lengths`` for one training epoch.

    The sets are shuffled, then stably sorted by length (so sets of equal length land in different
    batches from one epoch to the next), cut into batches of at most ``batch_size`` sets and
    ``max_elements`` padded elements (see :func:`skset._sets.length_batches`), and the batch order
    is shuffled. All randomness comes from ``generator``.
    """
    from .._sets import length_batches

    lengths = np.asarray(lengths, dtype=np.int64)
    n = len(lengths)
    if shuffle:
        perm = torch.randperm(n, generator=generator).numpy()
    else:
        perm = np.arange(n)
    order = perm[np.argsort(lengths[perm], kind="stable")]
    cut = length_batches(lengths[order], max_elements=max_elements, max_sets=batch_size,
                         sort=False)
    batches = [order[b] for b in cut]
    if shuffle and len(batches) > 1:
        bperm = torch.randperm(len(batches), generator=generator).numpy()
        batches = [batches[i] for i in bperm]
    return batches


def _progress(iterable, enabled: bool, desc: str):
    if not enabled:
        return iterable
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, desc=desc, leave=False)


def train_module(
    module: torch.nn.Module,
    loss_fn: Callable[[torch.nn.Module, object], torch.Tensor | tuple[torch.Tensor, float]],
    batches: Callable[[int], Iterable],
    *,
    validation: Callable[[torch.nn.Module], float] | None = None,
    optimizer: str = "adam",
    learning_rate_init: float = 1e-3,
    weight_decay: float = 0.0,
    max_iter: int = 200,
    tol: float = 1e-4,
    early_stopping: bool = False,
    n_iter_no_change: int = 10,
    optimizer_state: dict | None = None,
    grad_clip: float | None = None,
    verbose: int = 0,
    name: str = "",
    warn_convergence: bool = True,
    on_epoch_start: Callable[[int, torch.nn.Module, torch.optim.Optimizer], None] | None = None,
    on_epoch_end: Callable[[int, torch.nn.Module, torch.optim.Optimizer, float, float | None],
                           None] | None = None,
) -> TrainResult:
    """Train ``module`` with Adam/AdamW for up to ``max_iter`` epochs; the shared skset loop.

    Parameters
    ----------
    module : torch.nn.Module
        Trained in place (``module.train()`` during epochs, ``module.eval()`` around ``validation``
        and at the end).
    loss_fn : callable ``(module, batch) -> loss`` or ``-> (loss, weight)``
        The scalar loss tensor of one batch (what is back-propagated). The optional ``weight``
        (e.g. the number of sets in the batch) weights the batch in the reported epoch loss;
        default 1.
    batches : callable ``(epoch) -> iterable of batch``
        Called once per epoch (``epoch`` counts from 0 within this call); each item is passed to
        ``loss_fn`` untouched. Shuffle inside with a ``torch.Generator`` (see
        :func:`epoch_batches`).
    validation : callable ``(module) -> float`` or None
        A score of the current module on held-out data, **higher is better** (accuracy, R^2, or a
        negated loss), called once per epoch under ``torch.no_grad()`` in eval mode.
    optimizer : {"adam", "adamw"}
        ``adam`` adds ``weight_decay * w`` to the gradient (scikit-learn's ``alpha``), ``adamw``
        decouples it.
    learning_rate_init : float
        Adam's learning rate.
    weight_decay : float
        L2 penalty / decoupled weight decay.
    max_iter : int
        Maximum number of epochs.
    tol : float
        Improvement threshold. Without early stopping, training stops when the epoch loss has not
        dropped below ``best_loss - tol`` for ``n_iter_no_change`` consecutive epochs; with it,
        when the validation score has not risen above ``best_score + tol`` for
        ``n_iter_no_change`` epochs (scikit-learn's MLP rules).
    early_stopping : bool
        Stop on the validation score (``validation`` is required) and restore the weights of the
        best-scoring epoch.
    n_iter_no_change : int
        Patience in epochs.
    optimizer_state : dict or None
        An optimizer ``state_dict`` from a previous call (``TrainResult.optimizer_state``) to
        resume from: the warm start of an estimator keeps the module and passes this back.
    grad_clip : float or None
        Clip the global gradient norm to this value.
    verbose : int
        ``0`` silent; ``>= 1`` prints one line per epoch (loss, validation score, seconds) to
        stdout; ``>= 2`` also shows a tqdm bar over the batches of each epoch when tqdm is
        installed.
    name : str
        Prefix of the progress lines (e.g. the estimator's class name).
    warn_convergence : bool
        Emit a ``ConvergenceWarning`` when ``max_iter`` is reached before a stopping rule fired.
    on_epoch_start : callable ``(epoch, module, optimizer) -> None`` or None
        Called before each epoch's batches (e.g. to refit a linear head in closed form between
        epochs, as in the alternating scheme of supervised CKN / OTK).
    on_epoch_end : callable ``(epoch, module, optimizer, epoch_loss, score) -> None`` or None
        Called after each epoch's validation (``score`` is None without ``validation``), before
        the stopping rules (e.g. to halve the learning rate on a plateau).

    Returns
    -------
    TrainResult

    Raises
    ------
    FloatingPointError
        When the loss becomes NaN or infinite (with advice to lower the learning rate).
    """
    if early_stopping and validation is None:
        raise ValueError("early_stopping=True needs a validation callable.")
    params = [p for p in module.parameters() if p.requires_grad]
    opt = make_optimizer(params, optimizer, learning_rate_init, weight_decay)
    if optimizer_state is not None:
        try:
            opt.load_state_dict(optimizer_state)
        except (ValueError, KeyError):
            pass  # architecture or optimizer changed: start the optimizer afresh
    result = TrainResult()
    best_loss = math.inf
    best_score = -math.inf
    no_improve = 0
    prefix = f"{name}: " if name else ""
    for epoch in range(int(max_iter)):
        t0 = time.perf_counter()
        if on_epoch_start is not None:
            on_epoch_start(epoch, module, opt)
        module.train()
        total, weight_sum = 0.0, 0.0
        for batch in _progress(batches(epoch), verbose >= 2, f"{prefix}epoch {epoch + 1}"):
            out = loss_fn(module, batch)
            loss, w = out if isinstance(out, tuple) else (out, 1.0)
            if not torch.isfinite(loss):
                raise FloatingPointError(
                    f"{prefix}the training loss became {loss.item()} at epoch {epoch + 1}; lower "
                    "learning_rate_init, scale the inputs, or use norm='set'/residual='clean'."
                )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(params, grad_clip)
            opt.step()
            total += float(loss.detach()) * float(w)
            weight_sum += float(w)
        epoch_loss = total / max(weight_sum, 1e-300)
        result.loss_curve.append(epoch_loss)
        result.n_iter = epoch + 1
        score = None
        if validation is not None:
            module.eval()
            with torch.no_grad():
                score = float(validation(module))
            result.validation_scores.append(score)
        if on_epoch_end is not None:
            on_epoch_end(epoch, module, opt, epoch_loss, score)
        if verbose:
            msg = f"{prefix}epoch {epoch + 1}, loss = {epoch_loss:.6g}"
            if score is not None:
                msg += f", validation score = {score:.6g}"
            print(msg + f" ({time.perf_counter() - t0:.2f} s)", file=sys.stdout, flush=True)

        if early_stopping:
            if score > best_score + tol:
                no_improve = 0
            else:
                no_improve += 1
            if score > best_score:
                best_score = score
                result.best_state = copy.deepcopy(module.state_dict())
                result.best_score = score
        else:
            if epoch_loss < best_loss - tol:
                no_improve = 0
            else:
                no_improve += 1
            if epoch_loss < best_loss:
                best_loss = epoch_loss
                result.best_score = epoch_loss
        if no_improve >= n_iter_no_change:
            result.converged = True
            if verbose:
                what = "Validation score" if early_stopping else "Training loss"
                print(f"{prefix}{what} did not improve more than tol={tol} for "
                      f"{n_iter_no_change} consecutive epochs. Stopping.", flush=True)
            break
    if early_stopping and result.best_state is not None:
        module.load_state_dict(result.best_state)
    module.eval()
    result.optimizer_state = opt.state_dict()
    if not result.converged and warn_convergence:
        warnings.warn(
            f"{prefix}maximum iterations ({max_iter}) reached and the optimization hasn't "
            "converged yet.",
            ConvergenceWarning,
            stacklevel=3,
        )
    return result


def encode_class_targets(est, y, n_sets: int, first_fit: bool) -> tuple[np.ndarray, int]:
    """Class labels -> integer codes; sets ``est.classes_`` on the first fit.

    Shared by every set classifier. A later (``warm_start``) fit may only use known classes.
    Returns ``(codes, n_classes)``.
    """
    from .._sets import check_set_labels

    y = check_set_labels(y, n_sets)
    if first_fit:
        classes, enc = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(f"{type(est).__name__} needs at least 2 classes in y; got "
                             f"only {classes.tolist()}.")
        est.classes_ = classes
    else:
        unknown = np.setdiff1d(np.unique(y), est.classes_)
        if len(unknown):
            raise ValueError(f"y holds classes {unknown.tolist()} not seen in the first fit "
                             "(warm_start=True).")
        enc = np.searchsorted(est.classes_, y)
    return enc.astype(np.int64), len(est.classes_)


def encode_regression_targets(est, y, n_sets: int, first_fit: bool) -> tuple[np.ndarray, int]:
    """Standardise numeric targets ``(n_sets,)`` or ``(n_sets, n_outputs)``.

    Shared by every set regressor: the network sees unit-scale targets; on the first fit this sets
    ``est.y_mean_``, ``est.y_scale_`` and ``est._y_ndim`` (so ``predict`` returns ``y``'s shape).
    Returns ``(standardised (n_sets, n_outputs) targets, n_outputs)``.
    """
    from .._sets import check_set_labels

    y = check_set_labels(y, n_sets, multi_output=True)
    try:
        y = y.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{type(est).__name__} needs numeric targets; y has dtype "
                         f"{y.dtype}.") from None
    y2 = y.reshape(n_sets, -1)
    if first_fit:
        est._y_ndim = y.ndim
        est.y_mean_ = y2.mean(0)
        std = y2.std(0)
        est.y_scale_ = np.where(std > 0, std, 1.0)
    elif y2.shape[1] != len(est.y_mean_):
        raise ValueError(f"y has {y2.shape[1]} outputs but the first fit had "
                         f"{len(est.y_mean_)} (warm_start=True).")
    return (y2 - est.y_mean_) / est.y_scale_, y2.shape[1]
