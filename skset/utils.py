"""Utilities for running skset at scale: streaming transforms and fits, and thread limits.

Streaming
---------
``transform``/``predict`` take a whole collection and return one array; for a collection that does
not fit in memory use :func:`iter_transform`, which reads the sets in chunks from any iterable (a
generator, a list of ``np.memmap`` arrays, or a lazily loading object with ``__len__`` and
``__getitem__``) and yields the output of each chunk; only one chunk of sets and of outputs is held
at a time. Memory-mapped sets stay memory-mapped through validation (no copy is made of a float32 or
float64 array) until a batch is packed into a tensor.

For a collection that does not fit in memory at fit time, :func:`partial_fit` feeds one chunk of
sets into an estimator's ``partial_fit``, or through every step of a ``Pipeline``
(:func:`skset.distributed.fit` does it partition by partition for sets on a dask cluster).

Threads inside parallel workers
-------------------------------
torch, and the BLAS/OpenMP libraries behind numpy and scikit-learn, each start one thread per core.
When ``n`` workers share a machine (``GridSearchCV(n_jobs=n)``, a dask or Ray cluster) that is
``n * n_cores`` busy threads fighting for ``n_cores`` cores, which is often slower than one worker.
skset's thread policy (the install guide's "Threads") sets counts inside its own calls and, on a
machine of at most two cores or a busy one, keeps numpy's BLAS pools on one thread between them;
it does not divide the cores among workers. Choose one of:

* joblib's process backend (``loky``, the default) already caps the threads of each worker at
  ``n_cores // n_jobs`` (its ``inner_max_num_threads``) through ``OMP_NUM_THREADS``, which torch
  reads when it starts in the worker;
* a ``dask.distributed`` cluster started with ``processes=True`` (``LocalCluster``, ``dask-worker``)
  sets ``OMP_NUM_THREADS=1`` (and the MKL/OpenBLAS equivalents) in every worker process through its
  ``distributed.nanny.pre-spawn-environ`` setting; with ``processes=False`` (threads in one
  process) nothing is limited, so wrap the work in :func:`limit_threads` or call
  ``client.run(skset.utils.set_worker_threads, 1)``;
* anywhere else, :func:`limit_threads` limits torch's intra-op pool and every BLAS/OpenMP pool
  (through ``threadpoolctl``) for a block of code and restores them afterwards.

GPUs and workers
----------------
Give each worker its own GPU: start worker ``i`` with ``CUDA_VISIBLE_DEVICES=i`` (dask:
``dask-cuda``'s ``LocalCUDACluster`` does that; Ray: ``ray.remote(num_gpus=1)``), and keep
``device="auto"``, which then resolves to the one visible GPU of each worker. Workers without a GPU
fall back to the CPU. A fitted model sent back to the client is pickled through its CPU copy, so
the client needs no GPU.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Iterable, Iterator

import numpy as np
import torch

from ._steps import partial_fit_steps

__all__ = ["iter_transform", "limit_threads", "partial_fit", "set_worker_threads"]

_METHODS = ("transform", "predict", "predict_proba", "decision_function")


def _chunks(sets, chunk_size: int) -> Iterator[list]:
    """Lists of at most ``chunk_size`` sets, reading ``sets`` lazily."""
    if hasattr(sets, "to_numpy") and not isinstance(sets, np.ndarray):
        sets = sets.to_numpy()  # a pandas Series of sets: by position, as check_sets reads it
    if hasattr(sets, "__len__") and hasattr(sets, "__getitem__") and not isinstance(
        sets, (dict, str, bytes)
    ):
        if isinstance(sets, np.ndarray) and sets.dtype != object and sets.ndim == 3:
            for start in range(0, sets.shape[0], chunk_size):
                yield sets[start : start + chunk_size]  # a 3-D view: still lazy for a memmap
            return
        n = len(sets)
        for start in range(0, n, chunk_size):
            yield [sets[i] for i in range(start, min(start + chunk_size, n))]
        return
    try:
        it = iter(sets)
    except TypeError:
        raise TypeError(f"sets must be an iterable of sets, got a {type(sets).__name__}.") from None
    while True:
        chunk = list(itertools.islice(it, chunk_size))
        if not chunk:
            return
        yield chunk


def iter_transform(
    estimator,
    sets: Iterable,
    *,
    chunk_size: int = 1024,
    method: str = "transform",
    ids=None,
) -> Iterator:
    """Apply a fitted estimator to a stream of sets, one chunk at a time.

    Parameters
    ----------
    estimator : fitted skset estimator (or Pipeline)
        Anything with the method ``method`` that takes a collection of sets.
    sets : iterable of array-like of shape (n_i, d)
        A generator, a list of (memory-mapped) arrays, a 3-D ``np.memmap``, or any object with
        ``__len__`` and ``__getitem__`` that loads set ``i`` on demand. It is read once, in order.
    chunk_size : int, default=1024
        Sets per chunk: the memory held at a time is one chunk of sets plus its output (and the
        estimator's own batches of at most ``max_elements`` padded elements inside it).
    method : {"transform", "predict", "predict_proba", "decision_function"}, default="transform"
        The method to call on each chunk.
    ids : sequence, optional
        One id per set of the stream: an error that names a set (bad values, too few elements)
        names it by its id. Default: by its position in the stream (not in its chunk).

    Returns
    -------
    generator
        Of ``getattr(estimator, method)(chunk)`` for each chunk (the arguments are checked at
        the call): a 2-D array for set-to-vector estimators and predictions, a list of per-set
        arrays for :class:`~skset.NystromFeatures`.
        ``np.concatenate(list(iter_transform(est, X)))`` equals ``est.transform(X)`` (up to
        floating-point rounding, and for :class:`~skset.OTKEmbedding` up to its
        ``sinkhorn_tol``: batches are cut differently, and a set may stop at another check).

    Examples
    --------
    >>> import numpy as np
    >>> from skset import OTKEmbedding
    >>> from skset.utils import iter_transform
    >>> rng = np.random.default_rng(0)
    >>> otk = OTKEmbedding(n_supports=3, random_state=0).fit(
    ...     [rng.normal(size=(5, 2)) for _ in range(10)])
    >>> stream = (rng.normal(size=(int(n), 2)) for n in rng.integers(2, 9, 25))
    >>> [chunk.shape for chunk in iter_transform(otk, stream, chunk_size=10)]
    [(10, 6), (10, 6), (5, 6)]
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}.")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}.")
    fn = getattr(estimator, method, None)
    if fn is None:
        raise TypeError(f"{type(estimator).__name__} has no method {method!r}.")
    if isinstance(sets, (str, bytes)) or not (hasattr(sets, "__iter__")
                                              or hasattr(sets, "__getitem__")):
        raise TypeError(f"sets must be an iterable of sets (a list, an array, a generator), got "
                        f"{type(sets).__name__}.")
    # checked at the call, not at the first chunk: the stream itself is a generator
    return _chunk_calls(fn, sets, int(chunk_size), ids)


_SET_NUMBER = re.compile(r"\bset (\d+)\b")


def _chunk_calls(fn, sets, chunk_size: int, ids=None) -> Iterator:
    """``fn(chunk)`` for each chunk of ``sets``; a ``ValueError`` that names a set by its
    position in the chunk ("set 452") names it by its position in the stream, or by its id when
    ``ids`` (one per set of the stream) is given."""
    start = 0
    for chunk in _chunks(sets, chunk_size):
        try:
            out = fn(chunk)
        except ValueError as exc:
            _name_set(exc, ids, start)
            raise
        start += len(chunk)
        yield out


def _name_set(exc: BaseException, ids=None, start: int = 0) -> None:
    """Rewrite the first "set N" of ``exc``'s message, N a position in a chunk that starts at
    ``start`` of a stream, as ``"set <ids[start + N]>"`` (or ``"set <start + N>"`` without
    ``ids``), in place."""
    def where(m):
        i = start + int(m.group(1))
        return f"set {ids[i]!r}" if ids is not None and i < len(ids) else f"set {i}"

    if exc.args and isinstance(exc.args[0], str) and (start or ids is not None):
        exc.args = (_SET_NUMBER.sub(where, exc.args[0], count=1), *exc.args[1:])


def _check_chunk_labels(last, where: str, X, y, classes):
    """The checks of ``y`` that the final step makes, made before any step is updated: one
    label per set (:func:`skset._sets.check_set_labels`: length, NaN / infinity, mixed types)
    and, for a classifier, only classes of ``classes`` (or of its fitted ``classes_``)."""
    from sklearn.base import is_classifier

    from ._sets import check_set_labels

    try:
        n_sets = len(X)
    except TypeError:
        return y  # not a sized collection: the first step names the problem
    y = check_set_labels(y, n_sets, multi_output=True)
    known = classes if classes is not None else getattr(last, "classes_", None)
    if is_classifier(last) and known is not None and y.ndim == 1 and np.ndim(known) == 1:
        known = np.asarray(known)
        try:
            unknown = [c for c in np.unique(y).tolist() if c not in set(known.tolist())]
        except TypeError:
            unknown = []  # unorderable labels: check_set_labels named mixed types already
        if unknown:
            raise ValueError(f"{where}: y holds classes {unknown} not in "
                             f"{'classes=' if classes is not None else 'classes_ '}"
                             f"{known.tolist()}.")
    return y


def _is_indicator(y) -> bool:
    """Whether ``y`` is a multi-label indicator matrix (scikit-learn's reading)."""
    from sklearn.utils.multiclass import type_of_target

    try:
        return y is not None and type_of_target(y) == "multilabel-indicator"
    except ValueError:  # not a target scikit-learn reads: the estimator's checks name it
        return False


def partial_fit(estimator, X, y=None, *, classes=None, sample_weight=None):
    """Feed one chunk of sets into ``estimator.partial_fit``, or through a ``Pipeline``.

    For a ``Pipeline``, each step in turn: ``step.partial_fit(Xt, y)`` then ``Xt =
    step.transform(Xt)`` for the next step (each step is updated before it transforms the chunk
    for the next one); the final step gets ``classes`` when it is a classifier. Every step must
    have ``partial_fit`` (``NystromFeatures``, ``OTKEmbedding``, scikit-learn's
    ``SGDClassifier``, ``StandardScaler``...). The first call of a step fits what its ``fit``
    fits from the data on that first chunk (see each ``partial_fit``).

    A refused call changes nothing: ``y`` is checked first when the final step is a classifier
    or a regressor (one label, or one row of outputs, per set; finite; one kind of label; for a
    classifier only classes of ``classes`` or of its ``classes_``), and when a step refuses the
    chunk anyway the steps before it are put back as they were (a copy of their state is kept
    for the call).

    Parameters
    ----------
    estimator : estimator or sklearn.pipeline.Pipeline
        Updated in place.
    X : collection of sets
        One chunk.
    y : array-like of shape (n_sets,) or (n_sets, n_outputs), or None
        Its labels.
    classes : array-like or None
        Every class of the whole stream: required on the first call when the (final) estimator
        is a classifier, passed to its ``partial_fit`` on every call.
    sample_weight : array-like of shape (n_sets,) or None, default=None
        Weight of each set, passed to every step's ``partial_fit`` (a ``TypeError`` names a step
        whose ``partial_fit`` takes none). ``None``: not passed.

    Returns
    -------
    estimator

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import SGDClassifier
    >>> from sklearn.pipeline import make_pipeline
    >>> from skset import NystromFeatures, OTKEmbedding
    >>> from skset.utils import partial_fit
    >>> rng = np.random.default_rng(0)
    >>> pipe = make_pipeline(NystromFeatures(n_components=8, random_state=0),
    ...                      OTKEmbedding(n_supports=3, random_state=0),
    ...                      SGDClassifier(loss="log_loss", random_state=0))
    >>> for chunk in range(3):
    ...     X = [rng.normal(size=(5, 2)) for _ in range(10)]
    ...     pipe = partial_fit(pipe, X, np.arange(10) % 2, classes=[0, 1])
    >>> pipe.predict(X).shape
    (10,)
    """
    import copy
    import inspect

    from sklearn.base import is_classifier, is_regressor

    steps = partial_fit_steps(estimator)
    name, last = steps[-1]
    where = f"step {name!r} ({type(last).__name__})" if name else type(last).__name__
    kw = {}
    if is_classifier(last):
        # a multi-label indicator y needs none: its width fixes the labels
        if classes is None and not hasattr(last, "classes_") and not _is_indicator(y):
            raise ValueError(f"{where} is a classifier: pass classes= (every class of the "
                             "whole stream) on the first call, since a chunk may miss some.")
        if classes is not None:
            kw["classes"] = classes
    if sample_weight is not None:
        for n, step in steps:
            if "sample_weight" not in inspect.signature(step.partial_fit).parameters:
                at = f"step {n!r} ({type(step).__name__})" if n else type(step).__name__
                raise TypeError(f"{at}: its partial_fit takes no sample_weight.")
        kw["sample_weight"] = sample_weight
    if y is not None and (is_classifier(last) or is_regressor(last)):  # (others ignore y)
        y = _check_chunk_labels(last, where, X, y, classes)
    weights = {} if sample_weight is None else {"sample_weight": sample_weight}
    saved = [(step, copy.deepcopy(step.__dict__)) for _, step in steps[:-1]]
    try:
        Xt = X
        for _, step in steps[:-1]:
            Xt = step.partial_fit(Xt, y, **weights).transform(Xt)
        last.partial_fit(Xt, y, **kw)
    except BaseException:
        for step, state in saved:  # the earlier steps as they were
            step.__dict__.clear()
            step.__dict__.update(state)
        raise
    return estimator


def set_worker_threads(n_threads: int = 1) -> int:
    """Limit torch and every BLAS/OpenMP pool of this process to ``n_threads`` threads, for good.

    Meant for worker start-up, e.g. ``client.run(set_worker_threads, 1)`` on a dask cluster whose
    workers are threads of one process, or a Ray actor's ``__init__``. Returns ``n_threads``.
    """
    from threadpoolctl import threadpool_limits

    from ._threads import user_pool_limits

    n = _check_threads(n_threads)
    torch.set_num_threads(n)
    threadpool_limits(limits=n)
    user_pool_limits()  # skset's load adaptation no longer gives the pools other counts
    return n


def _check_threads(n_threads) -> int:
    from ._config import MAX_THREADS

    if isinstance(n_threads, bool) or not isinstance(n_threads, (int, np.integer)) or not (
            1 <= n_threads <= MAX_THREADS):
        raise ValueError(f"n_threads must be a positive integer (at most {MAX_THREADS}), got "
                         f"{n_threads!r}.")
    return int(n_threads)


@contextlib.contextmanager
def limit_threads(n_threads: int = 1):
    """Limit torch's intra-op threads and every BLAS/OpenMP pool inside a ``with`` block.

    The previous limits are restored on exit (also when the block raises). Use it around the work
    of each parallel worker so that ``n_workers * n_threads`` stays within the cores. Inside the
    block skset's calls follow their thread policy and do not adapt to the machine's load: with
    ``skset.set_config(n_threads="auto")`` (the default) they use at most ``n_threads`` torch
    threads; an explicit ``set_config(n_threads=k)`` wins over the limit (``k`` threads), so
    leave it ``"auto"`` in parallel workers.

    Parameters
    ----------
    n_threads : int, default=1
        Threads for torch (``torch.set_num_threads``) and for the native thread pools that
        ``threadpoolctl`` finds (OpenBLAS, MKL, OpenMP).

    Examples
    --------
    >>> import torch
    >>> from skset.utils import limit_threads
    >>> with limit_threads(1):
    ...     torch.get_num_threads()
    1
    """
    from threadpoolctl import threadpool_limits

    from ._threads import user_limits

    n = _check_threads(n_threads)
    before = torch.get_num_threads()
    with user_limits(), threadpool_limits(limits=n):
        torch.set_num_threads(n)
        try:
            yield n
        finally:
            torch.set_num_threads(before)
