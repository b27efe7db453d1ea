"""The training data of :class:`ABCClusterer`: checking labelled instances or a labelled pool,
holding instances (or classes) out for validation, drawing the training instances of each
optimisation step, and packing labelled instances into padded batches."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from .. import _instances  # through the module: tests spy on its sampler
from .._frames import frame_numbers
from .._sets import check_sets, length_batches, missing_labels, pack, to_numpy
from .._threads import user_stacklevel
from .._torch import make_generator
from ..neural_network._training import split_validation

#: a list of instances and the label array of each
Labelled = tuple[list[np.ndarray], list[np.ndarray]]


def is_pool(X, y) -> bool:
    """Whether ``(X, y)`` is one pool of elements ``(N, d)`` with one label per element."""
    if isinstance(X, torch.Tensor):
        X = to_numpy(X)
    if hasattr(X, "to_numpy") and not isinstance(X, np.ndarray):
        X = frame_numbers(X)  # pandas' nullable numbers (Float64, Int64) as floats
    # a 2-D array is never a collection of instances: a pool, whatever its labels (checked by
    # check_pool_labels: a pandas string column is an object array, a column vector (N, 1))
    return isinstance(X, np.ndarray) and X.dtype != object and X.ndim == 2


def check_instance_labels(y, sets, name: str = "y") -> list[np.ndarray]:
    """One label array per instance, as consecutive integers ``0 .. k_i - 1``."""
    if y is None:
        raise ValueError(f"{name} is None; ABCClusterer needs one label array per instance.")
    if isinstance(y, np.ndarray) and y.dtype != object and y.ndim == 2:
        y = list(y)
    try:
        n_y = len(y)
    except TypeError:
        raise TypeError(f"{name} must be a list of label arrays, one per instance.") from None
    if n_y != len(sets):
        raise ValueError(f"{name} holds {n_y} label arrays but X holds {len(sets)} instances; give "
                         "one label array per instance.")
    out = []
    for i, (lab, s) in enumerate(zip(y, sets, strict=True)):
        lab = np.asarray(to_numpy(lab) if isinstance(lab, torch.Tensor) else lab)  # on a GPU too
        if lab.ndim != 1:
            raise ValueError(f"{name}: the labels of instance {i} must be 1-D, got shape "
                             f"{lab.shape}.")
        if len(lab) != len(s):
            raise ValueError(f"{name}: instance {i} has {len(s)} elements but {len(lab)} labels.")
        if lab.dtype.kind == "f" and not np.isfinite(lab).all():
            raise ValueError(f"{name}: the labels of instance {i} contain NaN or infinity.")
        if missing_labels(lab).any():
            raise ValueError(f"{name}: the labels of instance {i} contain a missing label "
                             "(None or NaN).")
        try:
            out.append(np.unique(lab, return_inverse=True)[1].astype(np.int64).ravel())
        except TypeError:
            raise TypeError(f"{name}: the labels of instance {i} mix types (e.g. strings and "
                            "numbers).") from None
    return out


def check_pool_labels(y, n_elements: int) -> tuple[np.ndarray, np.ndarray]:
    """``(classes, class index of each element)`` of the labels of a pool."""
    if y is None:
        raise ValueError("y is None; a pool of elements X (N, d) needs one label per element.")
    try:
        yp = np.asarray(to_numpy(y) if isinstance(y, torch.Tensor) else y)  # on a GPU too
    except ValueError:  # ragged
        yp = np.empty(0)
    if yp.ndim == 2 and yp.shape[1] == 1:  # a column of labels
        yp = yp[:, 0]
    if yp.ndim != 1:
        raise ValueError(f"y must hold one label per element of the pool X ({n_elements}); got "
                         f"labels of shape {yp.shape}.")
    if yp.dtype == object:  # pandas' string and categorical columns, None among labels
        if missing_labels(yp).any() or any(isinstance(v, float) and not np.isfinite(v)
                                           for v in yp.tolist()):
            raise ValueError("y contains missing labels (None, NaN or pandas' NA).")
        try:
            yp = yp.astype(str) if all(isinstance(v, str) for v in yp.tolist()) else yp
            np.unique(yp)
        except TypeError:
            raise TypeError("y mixes labels of different types (e.g. strings and numbers).") from None
    if len(yp) != n_elements:
        raise ValueError(f"y has {len(yp)} labels but the pool X has {n_elements} elements.")
    if yp.dtype.kind == "f" and not np.isfinite(yp).all():
        raise ValueError("y contains NaN or infinity.")
    return np.unique(yp, return_inverse=True)


@dataclass
class TrainingData:
    """Checked training data: labelled instances, or one pool of elements (``classes`` set).

    ``sets`` holds the instances, or the pool alone; ``labels`` the labels of each instance as
    ``0 .. k_i - 1``, or the class index of each pool element; ``k_range`` the checked range of
    the number of clusters of the instances drawn from a pool.
    """

    sets: list[np.ndarray]
    labels: list[np.ndarray]
    n_features: int
    classes: np.ndarray | None = None
    k_range: tuple[int, int] | None = None

    @property
    def elements(self) -> np.ndarray:
        """Every training element (the standardisation's statistics)."""
        return self.sets[0] if self.classes is not None else np.concatenate(self.sets, axis=0)


def standardization(elements: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, scale)``: the elements' mean, and for every feature **one** scale, the root mean
    square of their standard deviations (no near-constant feature is amplified)."""
    with np.errstate(over="ignore"):  # float64 statistics: float32 data of 1e20 fits as float64's
        rms = float(np.sqrt(np.mean(elements.var(0, dtype=np.float64))))
    if not np.isfinite(rms):
        raise ValueError("X: the elements' variance overflows (values of magnitude "
                         f"{np.abs(elements).max():.3g}); rescale the data.")
    top = float(np.abs(elements).max(initial=0.0))  # constant: rounding noise of the values
    return (elements.mean(0, dtype=np.float64).astype(elements.dtype),
            np.full(elements.shape[1], rms if rms > 1e-12 * top else 1.0))


def check_training_data(X, y, *, instance_size: int, instance_n_clusters) -> TrainingData:
    """Labelled instances (each of at least 2 elements), or a labelled pool ``(N, d)`` +
    ``(N,)`` with enough classes for ``instance_n_clusters``."""
    if is_pool(X, y):
        Xp = check_sets(X, name="X", allow_pool=True, min_elements=2).sets[0]
        classes, y_idx = check_pool_labels(y, len(Xp))
        k_range = _instances._check_cluster_range(instance_n_clusters, len(classes), instance_size,
                                                  "instance_n_clusters")
        return TrainingData([Xp], [y_idx], Xp.shape[1], classes, k_range)
    coll = check_sets(X, name="X", min_elements=2)
    return TrainingData(coll.sets, check_instance_labels(y, coll.sets), coll.n_features)


def pair_cost(lengths) -> np.ndarray:
    """An instance of ``n`` elements costs ``n^2`` pairs (the affinity, the attention)."""
    return np.asarray(lengths, dtype=np.int64) ** 2


def pack_labels(labels: list[np.ndarray], n: int) -> torch.Tensor:
    """Labels padded with -1 to ``(len(labels), n)``."""
    buf = np.full((len(labels), n), -1, dtype=np.int64)
    for r, lab in enumerate(labels):
        buf[r, :len(lab)] = lab
    return torch.from_numpy(buf)


def labelled_batch(sets: list[np.ndarray], labels: list[np.ndarray], device):
    """``(X, mask, labels)`` tensors of (scaled) instances, padded to the longest."""
    Xb, Mb = pack(sets, device=device)
    return Xb, Mb, pack_labels(labels, Xb.shape[1]).to(device)


def labelled_batches(sets: list[np.ndarray], labels: list[np.ndarray], device,
                     max_pairs: int) -> list:
    """Length batches of (scaled) instances within ``max_pairs`` padded pairs each, as
    ``((X, mask, labels), label arrays)``."""
    lens = np.array([len(s) for s in sets])
    return [(labelled_batch([sets[i] for i in idx], [labels[i] for i in idx], device),
             [labels[i] for i in idx])
            for idx in length_batches(pair_cost(lens), max_elements=max_pairs)]


def held_out_batches(held_out: Labelled | None, scale, device, max_pairs: int) -> list | None:
    """:func:`labelled_batches` of held-out instances once ``scale``-d (``None`` without)."""
    if held_out is None:
        return None
    xs, labs = held_out
    return labelled_batches(scale(xs), labs, device, max_pairs)


def step_batches(chunk: int, *, draw, scale, batch_size: int, steps_per_chunk: int,
                 max_steps: int, device):
    """The batches of chunk ``chunk`` of the training steps (one "epoch" of the loop):
    ``steps_per_chunk`` batches of ``draw(batch_size)``, fewer at the end of ``max_steps``."""
    for _ in range(min(steps_per_chunk, max_steps - chunk * steps_per_chunk)):
        xs, labs = draw(batch_size)
        yield labelled_batch(scale(xs), labs, device)


def sample_instances(rng, X: np.ndarray, by_class: list[np.ndarray], n_instances: int,
                     n_elements: int, k_lo: int, k_hi: int) -> Labelled:
    """``n_instances`` instances of ``n_elements`` elements of pool ``X`` (Appendix B of the
    ABC paper: see :func:`skset.datasets.sample_clustering_instances`)."""
    xs, labs = [], []
    for _ in range(n_instances):
        idx, lab = _instances._sample_instance(rng, by_class, n_elements, k_lo, k_hi)
        xs.append(X[idx])
        labs.append(lab)
    return xs, labs


@dataclass
class TrainingInstances:
    """Where the training instances of each step come from, and the held-out ones.

    ``draw(n)`` returns the next ``n`` training instances (fewer when fewer are held); ``k_min``
    and ``k_max`` bound the number of clusters of a training instance; ``validation`` and
    ``calibration`` are held-out labelled instances (``None`` without them);
    ``validation_classes`` the classes of a pool held out for validation.
    """

    draw: Callable[[int], Labelled]
    k_min: int
    k_max: int
    validation: Labelled | None = None
    calibration: Labelled | None = None
    validation_classes: np.ndarray | None = None


class _PoolDraws:
    """Fresh instances from the training classes of a pool at every step."""

    def __init__(self, rng, X, by_class, n_elements, k_lo, k_hi):
        self.rng, self.X, self.by_class = rng, X, by_class
        self.n_elements, self.k_lo, self.k_hi = n_elements, k_lo, k_hi

    def __call__(self, n: int) -> Labelled:
        return sample_instances(self.rng, self.X, self.by_class, n, self.n_elements, self.k_lo,
                                self.k_hi)


class _ShuffledPasses:
    """The next instances of shuffled passes over the training instances (a new order, drawn
    from the torch generator, at the start of each pass)."""

    def __init__(self, sets, labels, train_idx, generator):
        self.sets, self.labels, self.train_idx, self.generator = sets, labels, train_idx, generator
        self.order, self.pos = np.empty(0, dtype=np.int64), 0

    def __call__(self, n: int) -> Labelled:
        tr = self.train_idx
        take = []
        while len(take) < min(n, len(tr)):
            if self.pos >= len(self.order):
                gen = self.generator
                self.order = tr[torch.randperm(len(tr), generator=gen, device=gen.device).cpu().numpy()]
                self.pos = 0
            take.append(self.order[self.pos])
            self.pos += 1
        return [self.sets[i] for i in take], [self.labels[i] for i in take]


#: calibration instances per validation instance (see :func:`pool_training_instances`)
CALIBRATION_FACTOR = 4


def pool_training_instances(X: np.ndarray, y_idx: np.ndarray, classes: np.ndarray, k_lo: int,
                            k_hi: int, *, n_elements: int, validate: bool,
                            validation_fraction: float, n_validation: int,
                            calibrate_prior: bool, rng, seed: int,
                            name: str, held_out=None) -> TrainingInstances:
    """Training draws from a pool of elements ``X`` with class index ``y_idx``.

    With ``validate`` and at least 4 classes, ``validation_fraction`` of the classes (at least 2,
    drawn from ``rng``) are held out and the validation instances come from them; with fewer
    classes, a stratified part of the elements of every class is held out. ``calibrate_prior``:
    when the held-out classes give instances of one ``k`` only, also draw calibration
    instances of every class with the training range of ``k`` (from a separate stream, so that
    training is unchanged), on which the prior's ``k`` rule is calibrated.
    """
    by_class = [np.flatnonzero(y_idx == c) for c in range(len(classes))]
    val_classes = None
    if validate and len(classes) >= 4:
        # held-out classes: the validation measures clustering classes never trained on
        n_va = min(max(2, int(round(validation_fraction * len(classes)))), len(classes) - 2)
        va_cls = np.sort(rng.choice(len(classes), n_va, replace=False))
        if (held_out is not None and np.isin(held_out, classes).all()
                and len(classes) - len(held_out) >= 2):
            # a warm start keeps the first fit's held-out classes: the kernel never trains on them
            va_cls = np.flatnonzero(np.isin(classes, held_out))
            n_va = len(va_cls)
        tr_cls = np.setdiff1d(np.arange(len(classes)), va_cls)
        val_classes = classes[va_cls]
        tr_by = [by_class[c] for c in tr_cls]
        va_by = [by_class[c] for c in va_cls]
        va_lo, va_hi = min(k_lo, n_va), min(k_hi, n_va)
        if k_hi > len(tr_cls):
            warnings.warn(f"{name}: {n_va} of the pool's {len(classes)} classes are held out for "
                          f"validation, which leaves {len(tr_cls)} to train on: training instances "
                          f"have at most {len(tr_cls)} clusters, not {k_hi} (instance_n_clusters), "
                          "and so does predict unless max_clusters is given. Pass "
                          "early_stopping=False, or a pool with more classes.", UserWarning,
                          stacklevel=user_stacklevel())
        k_lo, k_hi = min(k_lo, len(tr_cls)), min(k_hi, len(tr_cls))
    elif validate:
        tr, va = split_validation(len(X), validation_fraction, y=y_idx, stratify=True, seed=seed)
        tr_by = [tr[y_idx[tr] == c] for c in range(len(classes))]
        va_by = [va[y_idx[va] == c] for c in range(len(classes))]
        if min(len(v) for v in va_by) == 0 or min(len(t) for t in tr_by) == 0:
            raise ValueError(f"{name}: validation_fraction={validation_fraction} "
                             "leaves a class without training or validation elements.")
        va_lo, va_hi = k_lo, k_hi
    else:
        tr_by = by_class
    out = TrainingInstances(_PoolDraws(rng, X, tr_by, n_elements, k_lo, k_hi), k_lo, k_hi,
                            validation_classes=val_classes)
    if validate:
        out.validation = sample_instances(rng, X, va_by, n_validation, n_elements, va_lo, va_hi)
        if val_classes is not None and va_lo == va_hi and k_lo < k_hi and calibrate_prior:
            # used once, after training (the prior's choice and its k rule): 4x the validation
            # instances at little cost, for a choice with less noise
            out.calibration = sample_instances(np.random.RandomState(seed + 1), X, by_class,
                                               CALIBRATION_FACTOR * n_validation, n_elements,
                                               k_lo, k_hi)
    return out


def listed_training_instances(sets: list[np.ndarray], labels: list[np.ndarray], *,
                              validate: bool, validation_fraction: float, n_validation: int,
                              seed: int) -> TrainingInstances:
    """Training draws from labelled instances: shuffled passes over those not held out (with
    ``validate``, ``validation_fraction`` of them, at most ``n_validation``)."""
    val = None
    if validate:
        # (n_validation - 0.5) / n: ceil(frac * n) is n_validation whatever the rounding
        # (n_validation / n gave ceil(7.000000000000001) = 8 held out for 7 of 100)
        frac = min(validation_fraction, (n_validation - 0.5) / len(sets))
        tr, va = split_validation(len(sets), frac, seed=seed)
        val = ([sets[i] for i in va], [labels[i] for i in va])
    else:
        tr = np.arange(len(sets))
    ks = [int(lab.max()) + 1 for lab in labels]
    draws = _ShuffledPasses(sets, labels, tr, make_generator(seed, "cpu"))
    return TrainingInstances(draws, min(ks), max(ks), validation=val)


def training_instances(data: TrainingData, *, n_elements: int, validate: bool,
                       validation_fraction: float, n_validation: int, calibrate_prior: bool,
                       rng, seed: int, name: str, held_out=None) -> TrainingInstances:
    """:func:`pool_training_instances` or :func:`listed_training_instances` of ``data``
    (``held_out``: a pool's classes to hold out, those of the fit a warm start continues)."""
    if data.classes is None:
        return listed_training_instances(data.sets, data.labels, validate=validate,
                                         validation_fraction=validation_fraction,
                                         n_validation=n_validation, seed=seed)
    return pool_training_instances(
        data.sets[0], data.labels[0], data.classes, *data.k_range, n_elements=n_elements,
        validate=validate, validation_fraction=validation_fraction, n_validation=n_validation,
        calibrate_prior=calibrate_prior, rng=rng, seed=seed, name=name, held_out=held_out)
