"""Callbacks of the shared training loop (:func:`skset.neural_network._training.train_module`),
in the spirit of skorch's: the loop owns the mechanics (the optimizer, the epochs, the batches,
gradient clipping, the NaN check); everything else is a callback that sees and changes a
:class:`TrainingState`: validation (:class:`Validation` fills ``state.score`` and
``state.validation_loss``), stopping rules (:class:`EarlyStopping`), the best checkpoint
(:class:`BestCheckpoint`), learning-rate schedules (:class:`ReduceLROnPlateau`,
:class:`LinearWarmup`, :class:`WarmupCosineSchedule`), progress lines (:class:`EpochPrinter`) and
an estimator's own work between epochs (:class:`LambdaCallback`, or a class of its own).

At the end of an epoch the callbacks run in the order they are given: an estimator puts
:class:`Validation` first (the others read its score), then its schedules, then
:class:`EpochPrinter`, then the stopping rule and the checkpoint
(:meth:`skset.neural_network._base.BaseNeuralEstimator._train` composes that list).
"""

from __future__ import annotations

import copy
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

__all__ = [
    "TrainingState",
    "Callback",
    "LambdaCallback",
    "EpochPrinter",
    "Validation",
    "EarlyStopping",
    "BestCheckpoint",
    "LowestLossCheckpoint",
    "ReduceLROnPlateau",
    "LinearWarmup",
    "WarmupCosineSchedule",
]


@dataclass
class TrainingState:
    """What the callbacks of :func:`train_module` see and may change.

    ``epoch`` counts from 0 within one call; ``step`` counts the optimizer steps taken in this
    call; ``epoch_loss``, ``score`` and ``validation_loss`` are those of the epoch that just ended
    (``score``, higher is better, and ``validation_loss`` are set by :class:`Validation`, None
    without it); a callback stops training by setting ``stop = True`` (and ``stop_message``,
    printed with ``verbose``). ``best_score`` / ``best_state`` are the best validation score and
    its weights (:class:`BestCheckpoint`), or the lowest training loss (:class:`EarlyStopping` on
    the loss).
    """

    module: torch.nn.Module
    optimizer: torch.optim.Optimizer
    name: str = ""
    verbose: int = 0
    epoch: int = -1
    #: epochs of the fits before this call (warm starts, partial_fit), for the progress lines
    epochs_before: int = 0
    step: int = 0
    epoch_loss: float | None = None
    score: float | None = None
    validation_loss: float | None = None
    loss_curve: list = field(default_factory=list)
    validation_scores: list = field(default_factory=list)
    learning_rates: list = field(default_factory=list)
    stop: bool = False
    stop_message: str = ""
    best_score: float | None = None
    best_state: dict | None = None
    #: the training loss of the module's current weights over every training batch (eval mode,
    #: no gradients), set by :func:`train_module`; None where no loop gives one
    training_loss: Callable[[], float] | None = None

    @property
    def prefix(self) -> str:
        return f"{self.name}: " if self.name else ""


class Callback:
    """A hook into :func:`train_module` (in the spirit of skorch's callbacks).

    Every method gets the :class:`TrainingState`; the default methods do nothing. At the end of an
    epoch the callbacks run in the order given, after the epoch's validation;
    ``on_batch_begin`` runs before the forward pass of every batch (``state.step`` is the number
    of optimizer steps taken before it).
    """

    def on_train_begin(self, state: TrainingState) -> None:
        pass

    def on_epoch_begin(self, state: TrainingState) -> None:
        pass

    def on_batch_begin(self, state: TrainingState) -> None:
        pass

    def on_epoch_end(self, state: TrainingState) -> None:
        pass

    def on_train_end(self, state: TrainingState) -> None:
        pass


class LambdaCallback(Callback):
    """A callback from plain functions ``fn(state)``, e.g. to refit a linear head between epochs."""

    def __init__(self, *, on_epoch_begin=None, on_epoch_end=None):
        self._begin, self._end = on_epoch_begin, on_epoch_end

    def on_epoch_begin(self, state):
        if self._begin is not None:
            self._begin(state)

    def on_epoch_end(self, state):
        if self._end is not None:
            self._end(state)


class EpochPrinter(Callback):
    """With ``verbose >= 1``, one line per epoch: loss, validation score, seconds."""

    def on_epoch_begin(self, state):
        self._t0 = time.perf_counter()

    def on_epoch_end(self, state):
        if not state.verbose:
            return
        # numbered as n_iter_ counts them: a warm start or partial_fit goes on from the last
        msg = f"{state.prefix}epoch {state.epoch + 1 + state.epochs_before}, loss = {state.epoch_loss:.6g}"
        if state.score is not None:
            msg += f", validation score = {state.score:.6g}"
        print(msg + f" ({time.perf_counter() - self._t0:.2f} s)", file=sys.stdout, flush=True)

    def on_train_end(self, state):
        if state.verbose and state.stop_message:
            print(state.prefix + state.stop_message, file=sys.stdout, flush=True)


class Validation(Callback):
    """Score the module on held-out data at the end of every epoch.

    ``score_fn(module)`` returns the score (higher is better: accuracy, R^2, a negated loss) or
    ``(score, loss)``; it runs in eval mode under ``torch.no_grad()``. It sets ``state.score``
    (appended to ``state.validation_scores``) and ``state.validation_loss`` (the task loss on
    the held-out data, for schedules that monitor it; None when ``score_fn`` gives none). Put it
    first among the callbacks: the others read what it sets.
    """

    def __init__(self, score_fn: Callable[[torch.nn.Module], float | tuple[float, float]]):
        self.score_fn = score_fn

    def on_epoch_end(self, state):
        state.module.eval()
        with torch.no_grad():
            out = self.score_fn(state.module)
        score, loss = out if isinstance(out, tuple) else (out, None)
        state.score = float(score)
        state.validation_loss = None if loss is None else float(loss)
        state.validation_scores.append(state.score)


class EarlyStopping(Callback):
    """scikit-learn MLP's stopping rules.

    ``monitor="validation"``: stop when the validation score (higher is better, from
    :class:`Validation`) has not risen above ``best + tol`` for ``patience`` epochs (pair it with
    :class:`BestCheckpoint` to end with the best weights). ``monitor="loss"``: stop when the
    training loss has not dropped below ``best - tol`` for ``patience`` epochs (the weights of
    the last epoch are kept, as in scikit-learn; ``state.best_score`` is the lowest loss).
    """

    def __init__(self, monitor: str = "validation", *, tol: float = 1e-4, patience: int = 10,
                 best_score: float | None = None):
        if monitor not in ("validation", "loss"):
            raise ValueError(f"monitor={monitor!r} must be 'validation' or 'loss'.")
        self.monitor, self.tol, self.patience = monitor, tol, patience
        self.best_score = best_score  # a warm start's best validation score so far

    def on_train_begin(self, state):
        self._best = -math.inf if self.best_score is None else float(self.best_score)
        self._bad = 0

    def on_epoch_end(self, state):
        if self.monitor == "validation":
            if state.score is None:
                raise ValueError("EarlyStopping(monitor='validation') needs a Validation "
                                 "callback before it.")
            value = state.score
        else:
            value = -state.epoch_loss  # higher is better from here on
        self._bad = 0 if value > self._best + self.tol else self._bad + 1
        if value > self._best:
            self._best = value
            if self.monitor == "loss":
                state.best_score = -value
        if self._bad >= self.patience:
            what = "Validation score" if self.monitor == "validation" else "Training loss"
            state.stop = True
            state.stop_message = (f"{what} did not improve more than tol={self.tol} for "
                                  f"{self.patience} consecutive epochs. Stopping.")


class BestCheckpoint(Callback):
    """Keep a copy of the weights at the best validation score; load it when training ends.

    Sets ``state.best_score`` and ``state.best_state`` (a ``state_dict`` copy) whenever the score
    of :class:`Validation` beats every earlier one. ``best_score``: a warm start's best score so
    far, whose weights (restored when its fit ended) are those training starts from: they are
    kept unless an epoch beats it, as scikit-learn's MLP keeps its best weights across warm
    starts.
    """

    def __init__(self, best_score: float | None = None):
        self.best_score = best_score

    def on_train_begin(self, state):
        self._best = -math.inf
        if self.best_score is not None:
            self._best = state.best_score = float(self.best_score)
            state.best_state = copy.deepcopy(state.module.state_dict())

    def on_epoch_end(self, state):
        if state.score is None:
            raise ValueError("BestCheckpoint needs a Validation callback before it.")
        if state.score > self._best:
            self._best = state.score
            state.best_score = state.score
            state.best_state = copy.deepcopy(state.module.state_dict())

    def on_train_end(self, state):
        if state.best_state is not None:
            state.module.load_state_dict(state.best_state)


class LowestLossCheckpoint(Callback):
    """End with the weights of lowest training loss among the last weights and those around the
    epoch of lowest recorded loss.

    For a training that stops on its training loss (no validation split): a network whose loss
    spikes late (the post-norm Set Transformer trained for long on a few dozen sets can jump back
    to the class prior and not recover) ends with the weights it had before the spike, not with
    the spike. The loss an epoch records is the mean of its batches' losses while the weights
    moved, measured before each step: the weights at the end of that epoch can already be past
    a spike of its last step (Set Transformer, ItalyPowerDemand as sets of scalars, two steps an
    epoch: a recorded 0.197 whose end weights have a training loss of 1.374). So the callback
    keeps the weights at the start and at the end of the epoch of lowest recorded loss and, when
    training ends, measures the training loss of those two and of the last weights
    (``state.training_loss``: one pass over the training batches each, without gradients) and
    loads the lowest, the last weights first on a tie. A fit that only improves ends with its
    last weights, as without the callback. Without ``state.training_loss`` it loads the end of
    the epoch of lowest recorded loss.
    """

    def on_train_begin(self, state):
        self._best, self._kept = math.inf, None
        self._start = copy.deepcopy(state.module.state_dict())

    def on_epoch_end(self, state):
        end = copy.deepcopy(state.module.state_dict())
        if state.epoch_loss < self._best:
            self._best, self._kept = state.epoch_loss, (self._start, end)
        self._start = end

    def on_train_end(self, state):
        kept, self._kept, self._start = self._kept, None, None
        if kept is None:
            return
        start, end = kept
        if state.training_loss is None:
            state.module.load_state_dict(end)
            return
        last = copy.deepcopy(state.module.state_dict())
        best, best_loss = last, state.training_loss()
        for weights in (end, start):
            state.module.load_state_dict(weights)
            loss = state.training_loss()
            if loss < best_loss:
                best, best_loss = weights, loss
        state.module.load_state_dict(best)


class ReduceLROnPlateau(Callback):
    """Multiply the learning rate by ``factor`` after ``patience`` epochs without progress.

    Progress is a decrease of the monitored value (``monitor(state)``, lower is better: a training
    or validation loss) below ``best - tol * |best|``: relative, so that a change in the last
    rounding bits is no progress; the first epoch always sets ``best``.
    """

    def __init__(self, monitor: Callable[[TrainingState], float], *, patience: int = 5,
                 factor: float = 0.5, tol: float = 1e-4):
        self.monitor, self.patience, self.factor, self.tol = monitor, patience, factor, tol

    def on_train_begin(self, state):
        self._best, self._bad = None, 0

    def on_epoch_end(self, state):
        value = float(self.monitor(state))
        if self._best is None or value < self._best - self.tol * abs(self._best):
            self._best, self._bad = value, 0
            return
        self._bad += 1
        if self._bad >= self.patience:
            for g in state.optimizer.param_groups:
                g["lr"] *= self.factor
            self._bad = 0


class LinearWarmup(Callback):
    """Raise the learning rate linearly from ``lr / n_steps`` to ``lr`` over the first ``n_steps``
    optimizer steps, then leave it alone.

    ``lr`` is each parameter group's learning rate when training begins. The usual companion of
    post-norm Transformers (Vaswani et al., 2017; Xiong et al., 2020): large early Adam steps
    through a freshly initialised attention stack can push it into a flat region. During the
    warm-up this callback owns the learning rate (a schedule that changes it in that window is
    overridden at the next step).

    Parameters
    ----------
    n_steps : int
        Length of the warm-up in optimizer steps (batches); ``0`` disables it.
    """

    def __init__(self, n_steps: int):
        if int(n_steps) < 0:
            raise ValueError(f"n_steps={n_steps} must be a non-negative integer.")
        self.n_steps = int(n_steps)

    def on_train_begin(self, state):
        self._base = [g["lr"] for g in state.optimizer.param_groups]

    def on_batch_begin(self, state):
        if state.step >= self.n_steps:
            return
        frac = (state.step + 1) / self.n_steps
        for g, lr in zip(state.optimizer.param_groups, self._base, strict=True):
            g["lr"] = lr * frac


class WarmupCosineSchedule(Callback):
    """Per optimiser step: a linear warm-up to the peak learning rate over ``warmup_steps``, the
    peak held, then a cosine decay over the last ``decay_steps`` to ``final_fraction`` of the peak
    at ``total_steps`` (held after that).

    The peak is each parameter group's learning rate when training begins. Step ``t`` (0-based,
    the steps already taken in this call) runs with ``lr * (t + 1) / warmup_steps`` during the
    warm-up, ``lr`` until ``s = total_steps - decay_steps``, and ``lr * (f + (1 - f) (1 +
    cos(pi u)) / 2)``, ``u = (t - s) / decay_steps``, after it (``decay_steps=None``: the decay
    starts right after the warm-up, the plain warm-up + cosine schedule). Holding the peak and
    decaying at the end ("warmup-stable-decay") keeps the progress of a constant rate when the
    budget is short and the end-of-training gain of a decay.

    With ``patience`` (validation checks) the schedule also owns the stopping rule: when the
    validation score has not risen above its best by ``tol`` for ``patience`` checks during the
    held phase, the decay starts at once (over the same number of steps, capped by
    ``total_steps``); in the second half of the decay (the rate at most half the peak) the same
    stall stops training, and so does the end of the decay (a stop early in the decay, at nearly
    the peak rate, lost the annealing's gain on circles). So a plateau of the validation score
    ends in an annealing phase rather than in a stop at the peak rate (a stop before the decay
    lost clustering quality on circles; user guide, :ref:`abc-training-defaults`). Pair it with
    :class:`BestCheckpoint` and no other stopping rule.

    ``smoothing``: the stall is judged on the mean of the last ``smoothing`` validation scores
    (fewer at the start) rather than on each score, so that one lucky check of a noisy score
    does not set a best that the following checks cannot beat (``1``: each score).
    """

    def __init__(self, total_steps: int, warmup_steps: int = 0, final_fraction: float = 0.0,
                 decay_steps: int | None = None, patience: int | None = None,
                 tol: float = 0.0, smoothing: int = 1):
        if int(total_steps) < 1 or int(warmup_steps) < 0:
            raise ValueError(f"total_steps={total_steps} must be >= 1 and "
                             f"warmup_steps={warmup_steps} >= 0.")
        self.total = int(total_steps)
        self.warmup = min(int(warmup_steps), self.total)
        self.final = float(final_fraction)
        span = self.total - self.warmup
        self.decay_start = self.warmup if decay_steps is None else \
            self.total - min(int(decay_steps), span)
        self.decay_end = self.total
        self.patience = None if patience is None else int(patience)
        self.tol = float(tol)
        if int(smoothing) < 1:
            raise ValueError(f"smoothing={smoothing} must be >= 1.")
        self.smoothing = int(smoothing)

    def factor(self, t: int) -> float:
        """The multiplier of the peak learning rate at step ``t``."""
        if t < self.warmup:
            return (t + 1) / self.warmup
        span = max(self.decay_end - self.decay_start, 1)
        u = min(max(t - self.decay_start, 0) / span, 1.0)
        return float(self.final + (1.0 - self.final) * 0.5 * (1.0 + np.cos(np.pi * u)))

    def on_train_begin(self, state):
        self._base = [g["lr"] for g in state.optimizer.param_groups]
        self._best, self._bad, self._recent = -np.inf, 0, []
        self.plateau_step = None

    def on_epoch_end(self, state):
        if self.patience is None or state.score is None:
            return
        self._recent = (self._recent + [float(state.score)])[-self.smoothing:]
        score = float(np.mean(self._recent))
        if score > self._best + self.tol:
            self._bad = 0
        else:
            self._bad += 1
        self._best = max(self._best, score)
        decaying = state.step > self.decay_start
        if self._bad >= self.patience and not decaying:
            # a plateau at the peak rate: anneal now, over the planned length of the decay
            length = self.decay_end - self.decay_start
            self.decay_start = max(state.step, self.warmup)
            self.decay_end = min(self.decay_start + length, self.total)
            self.plateau_step = state.step
            self._bad = 0
        elif (decaying and self._bad >= self.patience
              and self.factor(state.step) <= 0.5) or state.step >= self.decay_end:
            state.stop = True
            state.stop_message = ("Validation score stalled during the learning-rate decay. "
                                  "Stopping." if state.step < self.decay_end else
                                  "Learning-rate decay finished. Stopping.")

    def on_batch_begin(self, state):
        f = self.factor(state.step)
        for g, lr in zip(state.optimizer.param_groups, self._base, strict=True):
            g["lr"] = lr * f

    def on_train_end(self, state):  # a warm start begins again from the peak
        for g, lr in zip(state.optimizer.param_groups, self._base, strict=True):
            g["lr"] = lr
