"""Past one machine: a fitted skset estimator applied to sets stored on a dask cluster
(:func:`transform`), and an estimator fitted on them chunk by chunk (:func:`fit`).

``pip install skset[dask]``. The sets live in a dask DataFrame in long format (one row per element,
a set-id column; what :func:`skset.sets_from_frame` reads) or in a dask Bag of ``(n_i, d)``
arrays. :func:`transform` applies a fitted estimator partition by partition and returns a lazy
dask DataFrame indexed by set id, with named columns, that can be computed, joined or written to
parquet (``.to_parquet(path)``) without ever collecting the sets on the client.

What is sent where:

* the fitted estimator goes into the task graph **once**, as one key that every partition's task
  depends on: each worker receives it once and keeps it for all its partitions (with a
  ``distributed`` client, ``client.scatter(estimator, broadcast=True)`` may be passed instead as
  ``estimator``: the same, sent ahead of the graph);
* the rows of one set may lie in several partitions of a DataFrame: they are co-located first by
  a shuffle on the id column (all-to-all traffic, about the size of the data once). When the
  frame is already partitioned by set (every set's rows in one partition, e.g. written by set or
  read from parquet files of whole sets), pass ``partitioned=True`` and the shuffle is skipped;
* each partition's sets are transformed on its worker with the estimator's own batching, bounded
  by its element budget (``max_elements``), so a worker's memory grows with its partition, never
  with the whole collection.

:func:`fit` goes the other way: the estimator stays on the client and the partitions come to it,
one at a time (the next one computed on the cluster while the current one is learned from, with
a ``distributed`` client), each fed into ``partial_fit`` (:func:`skset.utils.partial_fit`: through
every step of a ``Pipeline``). The client holds at most two partitions, never the collection.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.utils.validation import check_is_fitted

from ._frames import sets_from_frame

__all__ = ["fit", "transform", "worker_allocator"]

# glibc allocator settings for worker processes (see worker_allocator): one arena, temporaries
# under 32 MiB from the heap, freed memory above 256 MiB handed back to the system
WORKER_ALLOCATOR = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
                    "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}

_METHODS = ("transform", "predict", "predict_proba", "decision_function")


def _output_columns(estimator, method: str) -> tuple[list[str], object]:
    """Column names and dtype of ``method``'s output."""
    if method == "transform":
        names = [str(n) for n in estimator.get_feature_names_out()]
        dt = getattr(estimator, "dtype_", None)
        return names, np.float64 if str(dt) in ("torch.float64", "float64") else np.float32
    if method == "predict":
        if hasattr(estimator, "classes_"):
            return ["prediction"], np.asarray(estimator.classes_).dtype
        n_out = len(getattr(estimator, "y_mean_", [0]))
        return (["prediction"] if n_out == 1 else [f"prediction_{i}" for i in range(n_out)],
                np.float64)
    classes = getattr(estimator, "classes_", None)
    if classes is None:
        raise ValueError(f"{type(estimator).__name__} has no classes_: method={method!r} needs a "
                         "classifier.")
    prefix = "proba" if method == "predict_proba" else "decision"
    return [f"{prefix}_{c}" for c in classes], np.float64 if method == "predict_proba" \
        else np.float32


def _apply(estimator, sets, ids, index_name, method, names):
    from .utils import iter_transform  # chunks of 1,024 sets: faster than one big call

    out = np.concatenate([np.asarray(o) for o in iter_transform(estimator, sets, method=method)])
    if out.ndim == 1:
        out = out[:, None]
    index = pd.Index(ids, name=index_name)
    return pd.DataFrame(out, index=index, columns=names)


def _frame_partition(pdf, estimator, by, columns, order_by, method, names, meta):
    if len(pdf) == 0:
        return meta
    sets, ids = sets_from_frame(pdf, by=by, columns=columns, order_by=order_by)
    return _apply(estimator, sets, ids, by, method, names).astype(meta.dtypes.to_dict())


def _bag_partition(items, estimator, part, method, names, meta):
    items = list(items)
    if not items:
        return meta
    if all(isinstance(it, tuple) and len(it) == 2 for it in items):
        ids = [it[0] for it in items]
        sets = [np.asarray(it[1]) for it in items]
    else:  # plain arrays: the id is the partition and the position in it
        ids = [(part << 32) | j for j in range(len(items))]
        sets = [np.asarray(it) for it in items]
    return _apply(estimator, sets, ids, meta.index.name, method, names).astype(
        meta.dtypes.to_dict())


def transform(estimator, data, *, by=None, columns=None, order_by=None, method="transform",
              partitioned=False):
    """Apply a fitted estimator to every set of a dask collection; a lazy dask DataFrame.

    Parameters
    ----------
    estimator : fitted skset estimator or pipeline (or a ``distributed`` Future of one)
        Anything with ``method`` taking a list of sets: ``NystromFeatures`` is per element and
        is not supported here; put it in a ``Pipeline`` that ends in a set-level step.
    data : dask.dataframe.DataFrame or dask.bag.Bag
        A long frame (one row per element) with the set-id column ``by``; or a Bag whose items
        are ``(n_i, d)`` arrays or ``(set_id, array)`` pairs.
    by : str
        The set-id column of a frame (required for frames).
    columns, order_by : list of str, optional
        The feature columns and the order of rows within a set (see
        :func:`skset.sets_from_frame`).
    method : {"transform", "predict", "predict_proba", "decision_function"}
        What to compute.
    partitioned : bool, default=False
        The frame is already partitioned by set (all rows of a set in one partition): skip the
        shuffle on ``by``. Wrong when a set straddles two partitions: it is then cut in two sets
        of the same id.

    Returns
    -------
    dask.dataframe.DataFrame
        One row per set, indexed by set id (for Bag items without ids: ``partition * 2**32 +
        position``), columns ``<name>0, <name>1, ...`` (``transform``: the estimator's
        ``get_feature_names_out``), ``prediction`` (``predict``; ``prediction_<i>`` for several
        regression outputs), ``proba_<class>`` or ``decision_<class>``. Lazy: nothing runs
        until ``.compute()``, ``.to_parquet(...)``, ``.persist()``.
    """
    import dask
    import dask.bag as db
    import dask.dataframe as dd

    if method not in _METHODS:
        raise ValueError(f"method={method!r} must be one of {_METHODS}.")
    local = estimator
    if type(estimator).__name__ == "Future":
        local = estimator.result()
    last = local.steps[-1][1] if hasattr(local, "steps") else local
    if type(last).__name__ == "NystromFeatures":
        raise TypeError("NystromFeatures maps elements, not sets: put it in a Pipeline that ends "
                        "in a set-level step (OTKEmbedding, a classifier...).")
    if not hasattr(local, method):
        raise TypeError(f"{type(local).__name__} has no {method}().")
    check_is_fitted(local)
    names, dtype = _output_columns(local, method)
    shared = estimator if local is not estimator else dask.delayed(estimator, pure=True)

    if isinstance(data, dd.DataFrame):
        if not isinstance(by, str):
            raise ValueError("by= must name the set-id column of the frame.")
        if by not in data.columns:
            raise ValueError(f"by={by!r} is not a column of the frame.")
        meta = pd.DataFrame({n: pd.Series(dtype=dtype) for n in names},
                            index=pd.Index([], name=by, dtype=data[by].dtype))
        if not partitioned:
            data = data.shuffle(on=by)
        return data.map_partitions(_frame_partition, shared, by, columns, order_by, method,
                                   names, meta, meta=meta, align_dataframes=False)
    if isinstance(data, db.Bag):
        meta = pd.DataFrame({n: pd.Series(dtype=dtype) for n in names},
                            index=pd.Index([], name="set", dtype=object))
        parts = [dask.delayed(_bag_partition)(p, shared, i, method, names, meta)
                 for i, p in enumerate(data.to_delayed())]
        return dd.from_delayed(parts, meta=meta, verify_meta=False)
    raise TypeError(f"data must be a dask DataFrame or Bag, got {type(data).__name__}; for "
                    "sets in memory call the estimator itself (or skset.utils.iter_transform).")


def worker_allocator(**overrides):
    """Give the dask worker processes started from this process an allocator setting under
    which skset runs at its in-process speed (Linux, glibc).

    dask's nanny starts each worker with ``MALLOC_TRIM_THRESHOLD_=65536``, to hand freed memory
    back to the system quickly. That switches off glibc's dynamic mmap threshold, and a worker's
    task thread allocates from an arena of its own that is trimmed as eagerly: the temporaries of
    every batch (a few MB each) are mapped and unmapped again, with a page fault per page each
    time, and skset's transform spends much of a worker's time in the kernel (the scaling guide
    has the measurements). This sets dask's
    ``distributed.nanny.pre-spawn-environ`` to :data:`WORKER_ALLOCATOR` (one arena,
    ``MALLOC_ARENA_MAX=1``; temporaries under 32 MiB from the heap; memory handed back above
    256 MiB of free space), updated by ``overrides`` (``NAME="value"``; ``NAME=None`` leaves
    dask's value).

    Call it before creating the cluster (``LocalCluster``, or any nanny started in this
    process); workers started elsewhere (``dask worker`` on other machines) need the variables in
    their environment or in their dask configuration. dask's nanny reads a variable of this
    process's environment before its configuration (and writes its configuration into this
    process's environment when it starts a worker, so that a second cluster inherits the first
    one's values): the variables are therefore also set in ``os.environ``. Costs: a worker may
    hold up to 256 MiB of freed memory instead of returning it, and with several threads per
    worker the one arena is shared (with one thread per worker, the layout skset's measurements
    use, nothing). Other platforms ignore the variables.

    Returns
    -------
    context manager
        The change is in force on return; used in a ``with`` block (``with worker_allocator():
        ...``), the configuration and ``os.environ`` are restored at its end.

    Examples
    --------
    >>> import skset.distributed as sd
    >>> from distributed import LocalCluster
    >>> sd.worker_allocator()  # doctest: +SKIP
    >>> cluster = LocalCluster(n_workers=2, threads_per_worker=1)  # doctest: +SKIP
    """
    import os

    import dask

    try:  # its configuration (the nanny's environment) is defined when it is imported
        import distributed  # noqa: F401
    except ImportError as exc:
        raise ImportError("worker_allocator configures the workers of dask.distributed, which is "
                          "not installed: pip install skset[dask].") from exc
    env = dict(WORKER_ALLOCATOR)
    for name, value in overrides.items():
        if not (isinstance(value, (str, int)) or value is None) or isinstance(value, bool):
            raise TypeError(f"worker_allocator: {name} must be a string, an int or None, got "
                            f"{type(value).__name__}.")
        if value is None:
            env.pop(name, None)
            continue
        env[name] = str(value)
        if "\x00" in env[name]:
            raise ValueError(f"worker_allocator: {name} holds a NUL character, which an "
                             "environment variable cannot hold.")
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    config = dask.config.set({f"distributed.nanny.pre-spawn-environ.{name}": value
                              for name, value in env.items()})
    return _Restore(config, saved)


class _Restore:
    """:func:`worker_allocator`'s result: as a context manager, undoes the change at exit."""

    def __init__(self, config, saved):
        self._config, self._saved = config, saved

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        import os

        self._config.__exit__(*exc)
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        return False


# -- fitting by partitions -------------------------------------------------------------------------
def _client():
    """The current ``distributed`` client, or ``None``."""
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def _computed(parts):
    """The computed value of each lazy object of ``parts``, one at a time, in order: with a
    ``distributed`` client the next one is computed on the cluster while the caller works on
    the current one; otherwise with dask's default scheduler."""
    client = _client()
    if client is None:
        for p in parts:
            yield p.compute()
        return
    ahead = None
    for p in parts:
        nxt = client.compute(p)
        if ahead is not None:
            yield ahead.result()
        ahead = nxt
    if ahead is not None:
        yield ahead.result()


def _frame_labels(pdf, by, label, ids) -> np.ndarray:
    """The label of each set ``ids`` of a partition from its column ``label``: one value per set,
    or a ``ValueError`` naming a set whose rows disagree."""
    grouped = pdf.groupby(by, sort=False)[label]
    n = grouped.nunique(dropna=False)
    bad = n.index[n.to_numpy() > 1]
    if len(bad):
        raise ValueError(f"y={label!r} must be constant within each set; set {bad[0]!r} has "
                         f"{int(n.loc[bad[0]])} different values.")
    return grouped.first().loc[ids].to_numpy()


def _lookup(labels, ids) -> np.ndarray:
    """``labels`` (a pandas Series indexed by set id) of the sets ``ids``."""
    missing = pd.Index(ids).difference(labels.index)
    if len(missing):
        raise ValueError(f"y has no label for {len(missing)} set(s), e.g. set {missing[0]!r}.")
    return labels.loc[ids].to_numpy()


def _bag_chunk(items, labels):
    """``(sets, y)`` of a Bag partition: ``(id, array)`` pairs (labels looked up in
    ``labels``), ``(id, array, label)`` triples, or plain arrays (no labels)."""
    if all(isinstance(it, tuple) and len(it) == 3 for it in items):
        if labels is not None:
            raise ValueError("the Bag's items carry their labels ((id, array, label)): leave y "
                             "out.")
        return [np.asarray(it[1]) for it in items], np.asarray([it[2] for it in items])
    if all(isinstance(it, tuple) and len(it) == 2 for it in items):
        sets = [np.asarray(it[1]) for it in items]
        return sets, None if labels is None else _lookup(labels, [it[0] for it in items])
    if labels is not None:
        raise ValueError("y needs set ids: give the Bag (set_id, array) pairs, or (set_id, "
                         "array, label) triples.")
    return [np.asarray(it) for it in items], None


def fit(estimator, data, *, by=None, columns=None, order_by=None, y=None, classes=None,
        epochs=1, partitioned=False):
    """Fit an estimator (or a ``Pipeline``) on every set of a dask collection, partition by
    partition, with ``partial_fit``; the sets are never all on the client.

    Each partition is computed on the cluster, brought to the client, cut into sets and fed to
    :func:`skset.utils.partial_fit` (every step of a ``Pipeline`` in turn, each step updated
    before it transforms the chunk for the next); one pass over the partitions per epoch, in
    their order. The first partition is the first chunk of every step: the choices a
    ``partial_fit`` makes from the data (``NystromFeatures``' element map and standardisation,
    ``OTKEmbedding``'s number of supports, a network's standardisation) are made on it, so it
    should be representative (shuffle the sets over partitions). With a ``distributed`` client
    the next partition is computed while the current one is learned from.

    Parameters
    ----------
    estimator : estimator or sklearn.pipeline.Pipeline
        Every step must have ``partial_fit`` (e.g. ``NystromFeatures``, ``OTKEmbedding``,
        ``SGDClassifier(loss="log_loss")``, ``OTKClassifier``); a ``TypeError`` names the first
        that has not. Updated in place and returned.
    data : dask.dataframe.DataFrame or dask.bag.Bag
        A long frame (one row per element) with the set-id column ``by``; or a Bag of
        ``(set_id, array)`` pairs, of ``(set_id, array, label)`` triples, or of plain ``(n_i,
        d)`` arrays (without labels).
    by : str
        The set-id column of a frame (required for frames).
    columns, order_by : list of str, optional
        The feature columns and the order of rows within a set (see
        :func:`skset.sets_from_frame`); by default every column but ``by``, ``order_by`` and a
        label column ``y``.
    y : str, pandas.Series, dask Series or None
        The labels, one per set: for a frame, the name of a column that is constant within each
        set (a set whose rows disagree raises a ``ValueError``), or a Series indexed by set id
        (a dask Series is computed once: one value per set); for a Bag of pairs, a Series
        indexed by set id. ``None``: unsupervised (or labels in the Bag's triples).
    classes : array-like or None
        Every class of the stream, for a classifier's first ``partial_fit`` (required then).
    epochs : int, default=1
        Passes over the partitions.
    partitioned : bool, default=False
        The frame is already partitioned by set (all rows of a set in one partition): each
        partition is read as it is. Otherwise the frame is shuffled on ``by``; with a
        ``distributed`` client the shuffled frame is persisted on the workers once (the epochs
        do not repeat the shuffle); with a local scheduler it is not (that would hold it in this
        process), and each partition repeats its part of the shuffle.

    Returns
    -------
    estimator
        The estimator given, fitted.

    See Also
    --------
    transform : the fitted estimator applied to the collection, partition by partition.
    skset.utils.partial_fit : one chunk in memory.
    """
    import dask.bag as db
    import dask.dataframe as dd

    from .utils import _partial_fit_steps
    from .utils import partial_fit as partial_fit_chunk

    _partial_fit_steps(estimator)  # every step can learn from chunks: fail before any work
    if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or epochs < 1:
        raise ValueError(f"epochs must be a positive integer, got {epochs!r}.")
    labels = None
    if y is not None and not isinstance(y, str):
        labels = y.compute() if hasattr(y, "compute") else y
        if not isinstance(labels, pd.Series):
            raise TypeError("y must be a column name (frames), a pandas or dask Series indexed "
                            f"by set id, or None; got {type(y).__name__}.")
    if isinstance(data, dd.DataFrame):
        if not isinstance(by, str):
            raise ValueError("by= must name the set-id column of the frame.")
        for name, col in (("by", by), ("y", y if isinstance(y, str) else None)):
            if col is not None and col not in data.columns:
                raise ValueError(f"{name}={col!r} is not a column of the frame.")
        if columns is None and isinstance(y, str):
            skip = {by, y, *([order_by] if isinstance(order_by, str) else order_by or [])}
            columns = [c for c in data.columns if c not in skip]
        if not partitioned:  # kept on the workers (not with a local scheduler: in this process)
            data = data.shuffle(on=by)
            data = data if _client() is None else data.persist()

        def chunks():
            for pdf in _computed(data.to_delayed()):  # one graph, optimised once
                if len(pdf) == 0:
                    continue
                sets, ids = sets_from_frame(pdf, by=by, columns=columns, order_by=order_by)
                yield sets, (_frame_labels(pdf, by, y, ids) if isinstance(y, str)
                             else None if labels is None else _lookup(labels, ids))
    elif isinstance(data, db.Bag):
        if isinstance(y, str):
            raise ValueError("y as a column name needs a frame; for a Bag pass a Series indexed "
                             "by set id, or (set_id, array, label) items.")

        def chunks():
            for items in _computed(data.to_delayed()):
                if len(items):
                    yield _bag_chunk(list(items), labels)
    else:
        raise TypeError(f"data must be a dask DataFrame or Bag, got {type(data).__name__}; for "
                        "sets in memory call partial_fit (or skset.utils.partial_fit) per chunk.")
    for _ in range(int(epochs)):
        for sets, labels_of in chunks():
            partial_fit_chunk(estimator, sets, labels_of, classes=classes)
    return estimator
