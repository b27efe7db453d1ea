"""The training of :class:`ABCClusterer`'s kernel: the standardisation and the network built
from the parameters, the training loop's callbacks (validation by the eigengap clustering of
held-out instances, the warm-up / cosine schedule that owns the stopping rule, the best
checkpoint) and the loss of a batch of instances."""

from __future__ import annotations

from functools import partial

import numpy as np
import torch

from ..neural_network._callbacks import (
    BestCheckpoint,
    EpochPrinter,
    Validation,
    WarmupCosineSchedule,
)
from ..neural_network._training import standard_callbacks
from ..nn.abc import ABCKernel, abc_loss
from ._abc_data import standardization, step_batches
from ._abc_select import eigengap_ari

#: the schedule's stall test reads the mean of the last 5 validation scores (64 instances give a
#: score whose check-to-check noise is as large as the gains of the last third of training)
SCORE_SMOOTHING = 5


class KernelTraining:
    """``_init_kernel``, ``_train_kernel`` and the network of :class:`ABCClusterer` (which gives
    the parameters, ``_scale``, ``_train`` and ``_k_rule``)."""

    def _init_kernel(self, data, seed: int):
        """The standardisation and a fresh network (a refit chooses the prior again)."""
        d = data.n_features
        self.n_features_in_ = d
        if self.standardize:
            self.mean_, self.scale_ = standardization(data.elements)
        else:  # what predict reads: the fit's standardisation, or none
            self.__dict__.pop("mean_", None), self.__dict__.pop("scale_", None)
        # what an earlier fit chose or recorded: a refit chooses it again, or has none of it
        for attr in ("input_similarity_", "prior_params_", "kernel_mix_", "kernel_scores_",
                     "validation_k_right_", "lr_decay_start_"):
            self.__dict__.pop(attr, None)
        self.module_ = self._seeded(seed, lambda: self._build_module(d)).to(self.device_)
        self._record_prior()

    def _train_kernel(self, draw, val_parts, mix, seed: int):
        """Train the learned part alone (``mix`` on it), validating on ``val_parts``."""
        if mix is not None:
            mix.copy_(torch.tensor([0.0, 1.0], device=mix.device))
        max_steps, every = int(self.max_steps), int(self.eval_every)
        n_chunks = -(-max_steps // every)
        cw = self.class_weight
        if cw is not None and not isinstance(cw, str):
            cw = tuple(float(v) for v in cw)
        validation = None if val_parts is None else partial(
            eigengap_ari, parts=val_parts, rule=self._k_rule(), seed=seed, device=self.device_)
        schedule = None
        if self.learning_rate_schedule == "cosine":
            # with validation the schedule owns the stopping rule (a plateau starts the decay,
            # see WarmupCosineSchedule); the best checkpoint is restored at the end
            schedule = WarmupCosineSchedule(
                max_steps, int(round(self.warmup_fraction * max_steps)), final_fraction=0.01,
                decay_steps=int(round(self.decay_fraction * max_steps)),
                patience=int(self.n_iter_no_change) if validation is not None else None,
                tol=float(self.tol), smoothing=SCORE_SMOOTHING)
        if schedule is not None and validation is not None:
            callbacks = [Validation(validation), schedule, EpochPrinter(), BestCheckpoint()]
        else:
            callbacks = standard_callbacks(
                validation, [] if schedule is None else [schedule],
                early_stopping=validation is not None, tol=self.tol,
                n_iter_no_change=self.n_iter_no_change)
        # one "epoch" of the loop = eval_every optimisation steps
        batches = partial(step_batches, draw=draw, scale=self._scale, batch_size=self.batch_size,
                          steps_per_chunk=every, max_steps=max_steps, device=self.device_)
        self._train(partial(_batch_loss, class_weight=cw), batches, callbacks,
                    optimizer=self.optimizer, max_iter=n_chunks, warn_convergence=False,
                    units_per_epoch=every, max_units=max_steps)
        if schedule is not None:  # where the decay began (earlier than planned after a plateau)
            self.lr_decay_start_ = int(schedule.decay_start)

    def _build_module(self, n_features: int):
        sim = self.input_similarity
        params = getattr(self, "prior_params_", None)  # a fitted model: the prior it chose
        if hasattr(self, "input_similarity_"):
            sim = self.input_similarity_
        elif sim == "auto":
            sim = "knn"  # until the validation chooses
        net = ABCKernel(n_features, self.hidden_size, self.n_layers, self.n_heads,
                        compatibility=self.compatibility, compat_dim=self.compat_dim,
                        norm=self.norm, residual=self.residual, input_similarity=sim,
                        n_neighbors=(params or {}).get("n_neighbors",
                                                       self.n_neighbors))
        if params is not None and sim is not None:  # buffers, overwritten by a state dict
            net.sim_log_scale.fill_(float(np.log(params["scale"])))
            net.sim_offset.fill_(float(params["offset"]))
        return net

    def _untrained_module(self):
        return self._build_module(self.n_features_in_)


def _batch_loss(module, batch, class_weight=None):
    """Mean BCE of the predicted same-cluster matrix of a batch, and its number of instances."""
    Xb, Mb, Yb = batch
    return abc_loss(module(Xb, Mb), Yb, Mb, class_weight=class_weight), Xb.shape[0]
