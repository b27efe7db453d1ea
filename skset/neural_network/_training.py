"""The one training loop shared by every trained estimator in skset.

Estimators build a ``torch.nn.Module``, say how to compute the loss of one batch and how to cut an
epoch into batches, and hand both to :func:`train_module`, which owns the mechanics (the optimizer,
the epochs, the backward pass, gradient clipping, the NaN check) and nothing else; validation, the
stopping rules (scikit-learn's ``MLPClassifier`` semantics), the best checkpoint, learning-rate
schedules and progress lines are callbacks (:mod:`._callbacks`), composed by
:func:`standard_callbacks` or by the estimator. The estimators call it through
:meth:`skset.neural_network._base.BaseNeuralEstimator._train`, which passes their training
parameters and keeps the history. Helpers:

* :data:`TRAINING_PARAMS` - the allowed values of the training parameters, merged into the
  estimators' ``_parameter_constraints``;
* :func:`split_validation` - hold out ``validation_fraction`` of the sets (stratified for
  classifiers) for early stopping;
* :func:`epoch_batches` - length-bucketed batches of set indices for one epoch, shuffled with a
  ``torch.Generator`` (never the global RNG).

The targets a network trains on are encoded in :mod:`._targets`.

The ``sample_weight`` of a ``fit`` is checked by :func:`skset._validation.check_sample_weight` and
enters the weighted statistics of :mod:`skset._weighting`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from .._threads import user_stacklevel
from .._validation import (
    NON_NEGATIVE,
    POSITIVE,
    POSITIVE_INT,
    TORCH_PARAMS,
    Boolean,
    Integer,
    Real,
    check_params,
)
from ._callbacks import (
    BestCheckpoint,
    Callback,
    EarlyStopping,
    EpochPrinter,
    TrainingState,
    Validation,
)

__all__ = [
    "TrainResult",
    "train_module",
    "standard_callbacks",
    "make_optimizer",
    "split_validation",
    "epoch_batches",
    "check_training_params",
]


#: The allowed values of the training parameters of the neural estimators (merged into their
#: ``_parameter_constraints``; each estimator's ``__init__`` holds the defaults).
TRAINING_PARAMS = {
    "optimizer": ["adam", "adamw"],
    "learning_rate_init": [POSITIVE],
    "alpha": [NON_NEGATIVE],
    "batch_size": [POSITIVE_INT],
    "max_elements": [POSITIVE_INT, None],
    "max_iter": [POSITIVE_INT],
    "tol": [NON_NEGATIVE],
    "early_stopping": [Boolean()],
    "validation_fraction": [Real(0, 1, closed="neither")],
    "n_iter_no_change": [POSITIVE_INT],
    "warm_start": [Boolean()],
    "verbose": [Integer(0), Boolean()],
    **TORCH_PARAMS,
}


@dataclass
class TrainResult:
    """What :func:`train_module` returns.

    Attributes
    ----------
    loss_curve : list of float
        Mean training loss of each epoch run in this call (weighted by the batch weights).
    validation_scores : list of float
        The validation score of each epoch (empty without ``validation``).
    learning_rates : list of float
        The learning rate each epoch ran with (of the first parameter group).
    n_iter : int
        Epochs run in this call.
    best_score : float or None
        Best validation score (with :class:`BestCheckpoint`) or lowest training loss (with
        :class:`EarlyStopping` on the loss).
    best_state : dict or None
        ``state_dict`` copy at the best validation score (with :class:`BestCheckpoint`); it has
        already been loaded into the module when ``train_module`` returns.
    optimizer_state : dict
        The optimizer's ``state_dict`` at the end, to pass back for a warm start.
    converged : bool
        ``False`` when ``max_iter`` was reached before a callback stopped training.
    """

    loss_curve: list = field(default_factory=list)
    validation_scores: list = field(default_factory=list)
    learning_rates: list = field(default_factory=list)
    n_iter: int = 0
    best_score: float | None = None
    best_state: dict | None = None
    optimizer_state: dict | None = None
    converged: bool = False


def check_training_params(est) -> None:
    """Check the training attributes an object has against :data:`TRAINING_PARAMS`.

    For objects that are not estimators with a parameter table (the estimators check their whole
    table with ``_check_params``). Raises :class:`skset._validation.InvalidParameterError`.
    """
    check_params(est, {k: p for k, p in TRAINING_PARAMS.items() if hasattr(est, k)})


def _optimizer_step(opt: torch.optim.Optimizer) -> None:
    """``opt.step()`` with the CPU as torch's default device.

    Adam keeps its step counters on the CPU; torch 2.11 creates them on torch's default device,
    which a caller's ``torch.set_default_device`` (or ``with torch.device(...)``) may have set to
    another (torch 2.13 names the CPU). Every other tensor of the step follows its parameter.
    """
    if getattr(torch, "get_default_device", lambda: torch.device("cpu"))().type == "cpu":
        opt.step()
        return
    with torch.device("cpu"):
        opt.step()


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

    With ``stratify=True`` and labels ``y`` the split keeps the class proportions: when every
    class has at least two samples and each part can hold one of every class, it is
    scikit-learn's stratified ``train_test_split`` (as in scikit-learn's MLPClassifier).
    Otherwise (many classes with few samples each: a class with a single sample, more classes
    than the validation part holds) the validation samples come from the classes that have at
    least two, about ``validation_fraction`` of each (largest remainders, ties broken at
    random), and never a class's last sample: every class keeps at least one training sample,
    a class with a single sample stays whole in the training part, and the validation part is
    smaller than asked when the classes cannot give that many without losing their last
    training sample. Only when every class has a single sample is it a plain random split
    (classes then held out entirely). A 2-D ``y`` (a multi-label indicator matrix) is
    stratified on its label sets (each distinct row a class), by the same rule. Without
    ``stratify`` it is a plain random split. Raises a
    ValueError when either side would be empty.
    """
    from sklearn.model_selection import train_test_split

    idx = np.arange(n_samples)
    n_val = int(math.ceil(validation_fraction * n_samples))
    if n_val < 1 or n_samples - n_val < 1:
        raise ValueError(f"validation_fraction={validation_fraction} leaves an empty training or "
                         f"validation part with {n_samples} sets; use more sets, a different "
                         "validation_fraction, or early_stopping=False.")
    if stratify and y is not None:
        y = np.asarray(y)
        # multi-label targets (an indicator matrix): stratified on the label sets, each distinct
        # row one stratum (scikit-learn's own rule for 2-D y)
        y = np.unique(y.reshape(len(y), -1), axis=0, return_inverse=True)[1].ravel() \
            if y.ndim == 2 else y
        _, inv, counts = np.unique(y, return_inverse=True, return_counts=True)
        if counts.min() >= 2 and n_val >= len(counts) and n_samples - n_val >= len(counts):
            tr, va = train_test_split(idx, test_size=n_val, random_state=seed, stratify=y)
            return np.sort(tr), np.sort(va)
        room = counts - 1  # a class gives at most all but one of its samples
        if room.sum() > 0:
            return _split_keeping_every_class(inv.ravel(), counts, room,
                                              min(n_val, int(room.sum())), seed)
    tr, va = train_test_split(idx, test_size=n_val, random_state=seed)
    return np.sort(tr), np.sort(va)


def _split_keeping_every_class(inv, counts, room, n_val, seed):
    """``n_val`` validation samples, about the same fraction of each class, at most ``room[k]``
    of class ``k`` (largest remainders, ties at random); the rest in training."""
    rng = np.random.RandomState(seed)
    ideal = n_val * counts / counts.sum()
    take = np.minimum(np.floor(ideal).astype(np.int64), room)
    while (left := n_val - int(take.sum())) > 0:
        open_ = np.flatnonzero(take < room)
        order = np.lexsort((rng.random_sample(len(open_)), take[open_] - ideal[open_]))
        take[open_[order[:left]]] += 1
    # a random order of each class's samples: the first take[k] of class k are held out
    perm = rng.permutation(len(inv))
    order = perm[np.argsort(inv[perm], kind="stable")]
    rank = np.empty(len(inv), dtype=np.int64)
    rank[order] = np.arange(len(inv)) - np.repeat(np.cumsum(counts) - counts, counts)
    held = rank < take[inv]
    return np.flatnonzero(~held), np.flatnonzero(held)


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
        perm = torch.randperm(n, generator=generator, device=generator.device).cpu().numpy()
    else:
        perm = np.arange(n)
    order = perm[np.argsort(lengths[perm], kind="stable")]
    cut = length_batches(lengths[order], max_elements=max_elements, max_sets=batch_size,
                         sort=False)
    batches = [order[b] for b in cut]
    if shuffle and len(batches) > 1:
        bperm = torch.randperm(len(batches), generator=generator, device=generator.device).cpu().numpy()
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


def _loss_and_weight(out) -> tuple:
    """A ``loss_fn`` output as ``(loss, weight)``: the weight of a bare loss is 1."""
    return out if isinstance(out, tuple) else (out, 1.0)


def train_module(
    module: torch.nn.Module,
    loss_fn: Callable[[torch.nn.Module, object], torch.Tensor | tuple[torch.Tensor, float]],
    batches: Callable[[int], Iterable],
    *,
    parameters: Iterable[torch.nn.Parameter] | None = None,
    optimizer: str = "adam",
    learning_rate_init: float = 1e-3,
    weight_decay: float = 0.0,
    max_iter: int = 200,
    optimizer_state: dict | None = None,
    grad_clip: float | None = None,
    verbose: int = 0,
    name: str = "",
    warn_convergence: bool = True,
    callbacks: Iterable[Callback] = (),
    stacklevel: int | None = None,
    epochs_before: int = 0,
) -> TrainResult:
    """Train ``module`` with Adam/AdamW for up to ``max_iter`` epochs; the shared skset loop.

    The loop owns the mechanics and nothing else: the optimizer (and its state across warm
    starts), the epochs and their batches, the backward pass, gradient clipping and the NaN
    check. Validation, stopping rules, the best checkpoint, learning-rate schedules and progress
    lines are ``callbacks`` (:mod:`skset.neural_network._callbacks`); with none, it runs
    ``max_iter`` epochs.

    Parameters
    ----------
    module : torch.nn.Module
        Trained in place (``module.train()`` during epochs, ``module.eval()`` at the end).
    loss_fn : callable ``(module, batch) -> loss`` or ``-> (loss, weight)``
        The scalar loss tensor of one batch (what is back-propagated). The optional ``weight``
        (e.g. the number of sets in the batch) weights the batch in the reported epoch loss;
        default 1.
    batches : callable ``(epoch) -> iterable of batch``
        Called once per epoch (``epoch`` counts from 0 within this call); each item is passed to
        ``loss_fn`` untouched. Shuffle inside with a ``torch.Generator`` (see
        :func:`epoch_batches`). ``epoch=-1``: a pass outside the epochs, for the training loss
        of the current weights a callback may ask for (``state.training_loss``, no gradients,
        ``module.eval()``).
    parameters : iterable of torch.nn.Parameter or None
        What the optimizer updates (None: every parameter of ``module`` that requires a
        gradient). A part fitted otherwise (a head solved in closed form between epochs) is
        left out.
    optimizer : {"adam", "adamw"}
        ``adam`` adds ``weight_decay * w`` to the gradient (scikit-learn's ``alpha``), ``adamw``
        decouples it.
    learning_rate_init : float
        Adam's learning rate.
    weight_decay : float
        L2 penalty / decoupled weight decay.
    max_iter : int
        Maximum number of epochs.
    optimizer_state : dict or None
        An optimizer ``state_dict`` from a previous call (``TrainResult.optimizer_state``) to
        resume from: the warm start of an estimator keeps the module and passes this back.
    grad_clip : float or None
        Clip the global gradient norm to this value.
    verbose : int
        Kept in the state for :class:`EpochPrinter`; ``>= 2`` also shows a tqdm bar over the
        batches of each epoch when tqdm is installed.
    name : str
        Prefix of the progress lines and messages (e.g. the estimator's class name).
    warn_convergence : bool
        Emit a ``ConvergenceWarning`` when ``max_iter`` is reached before a callback stopped
        training.
    callbacks : iterable of Callback
        Run in order at each hook (see :mod:`skset.neural_network._callbacks`).
    stacklevel : int or None
        Of the ``ConvergenceWarning``; None: the first frame outside skset (the user's call).
    epochs_before : int
        Epochs of earlier calls on this module (a warm start, ``partial_fit``): the progress
        lines number this call's epochs after them.

    Returns
    -------
    TrainResult

    Raises
    ------
    FloatingPointError
        When the loss becomes NaN or infinite (with advice to lower the learning rate).
    """
    params = [p for p in (module.parameters() if parameters is None else parameters)
              if p.requires_grad]
    opt = make_optimizer(params, optimizer, learning_rate_init, weight_decay)
    if optimizer_state is not None:
        try:
            opt.load_state_dict(optimizer_state)
        except (ValueError, KeyError):
            pass  # architecture or optimizer changed: start the optimizer afresh
    state = TrainingState(module=module, optimizer=opt, name=name, verbose=int(verbose),
                          epochs_before=int(epochs_before))

    def training_loss() -> float:  # the current weights' loss over every training batch
        was = module.training
        module.eval()
        total, weight_sum = 0.0, 0.0
        with torch.no_grad():
            for batch in batches(-1):
                out = loss_fn(module, batch)
                loss, w = _loss_and_weight(out)
                total += float(loss) * float(w)
                weight_sum += float(w)
        module.train(was)
        return total / max(weight_sum, 1e-300)

    state.training_loss = training_loss
    cbs = list(callbacks)
    for cb in cbs:
        cb.on_train_begin(state)
    for epoch in range(int(max_iter)):
        state.epoch = epoch
        for cb in cbs:
            cb.on_epoch_begin(state)
        module.train()
        total, weight_sum = 0.0, 0.0
        label = f"{state.prefix}epoch {epoch + 1 + state.epochs_before}"
        for batch in _progress(batches(epoch), verbose >= 2, label):
            for cb in cbs:
                cb.on_batch_begin(state)
            out = loss_fn(module, batch)
            loss, w = _loss_and_weight(out)
            if not torch.isfinite(loss):
                raise FloatingPointError(
                    f"{state.prefix}the training loss became {loss.item()} at epoch {epoch + 1}; "
                    "lower learning_rate_init, scale the inputs, or use norm='set'/"
                    "residual='clean'."
                )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(params, grad_clip)
            _optimizer_step(opt)
            state.step += 1
            total += float(loss.detach()) * float(w)
            weight_sum += float(w)
        state.epoch_loss = total / max(weight_sum, 1e-300)
        state.loss_curve.append(state.epoch_loss)
        state.learning_rates.append(opt.param_groups[0]["lr"])
        state.score = state.validation_loss = None
        for cb in cbs:
            cb.on_epoch_end(state)
        if state.stop:
            break
    for cb in cbs:
        cb.on_train_end(state)
    module.eval()
    if not state.stop and warn_convergence:
        warnings.warn(
            f"{state.prefix}maximum iterations ({max_iter}) reached and the optimization hasn't "
            "converged yet.",
            ConvergenceWarning,
            stacklevel=user_stacklevel() if stacklevel is None else stacklevel,
        )
    return TrainResult(
        loss_curve=state.loss_curve, validation_scores=state.validation_scores,
        learning_rates=state.learning_rates, n_iter=state.epoch + 1,
        best_score=state.best_score, best_state=state.best_state,
        optimizer_state=opt.state_dict(), converged=state.stop,
    )


def standard_callbacks(validation=None, callbacks=(), *, early_stopping: bool = False,
                       tol: float = 1e-4, n_iter_no_change: int = 10,
                       best_score: float | None = None) -> list[Callback]:
    """The callbacks of scikit-learn MLP's training, around an estimator's own ``callbacks``:
    :class:`Validation` of ``validation`` first (when given), then ``callbacks``, then
    :class:`EpochPrinter`, then the stopping rule: with ``early_stopping`` on the validation
    score with :class:`BestCheckpoint` (the best weights restored), else on the training loss.
    ``best_score``: a warm start's best validation score so far (both callbacks start from it).
    An estimator that owns its stopping rule (a schedule that stops) composes its own list."""
    if early_stopping and validation is None:
        raise ValueError("early_stopping=True needs a validation callable.")
    out = [] if validation is None else [Validation(validation)]
    out += [*callbacks, EpochPrinter()]
    if early_stopping:
        out += [EarlyStopping("validation", tol=tol, patience=n_iter_no_change,
                              best_score=best_score), BestCheckpoint(best_score)]
    else:
        out.append(EarlyStopping("loss", tol=tol, patience=n_iter_no_change))
    return out
