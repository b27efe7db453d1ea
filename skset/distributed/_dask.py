"""The dask driver of :mod:`skset.distributed`: the only module of skset that imports dask.

:func:`transform` puts the fitted estimator into the task graph once and maps
:func:`._partitions.frame_partition` / :func:`._partitions.bag_partition` over the partitions;
:func:`fit` brings the partitions to the client one at a time (:func:`_computed`) and feeds each
through :func:`skset.utils.partial_fit`; :func:`worker_allocator` sets the allocator of dask's
worker processes. Everything that reads a partition is in :mod:`._partitions`, shared with any
other backend.
"""

from __future__ import annotations

import os

import numpy as np

from .. import utils
from .._steps import partial_fit_steps
from . import _partitions

__all__ = ["WORKER_ALLOCATOR", "fit", "transform", "worker_allocator"]

# glibc allocator settings for worker processes (see worker_allocator; documented where
# skset.distributed re-exports it): one arena, temporaries under 32 MiB from the heap, freed
# memory above 256 MiB handed back to the system
WORKER_ALLOCATOR = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
                    "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}


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
        :func:`skset.sets_from_frame`). By default the columns the estimator was fitted on when
        they are known (its first step's ``feature_names_in_``, which :func:`fit` records; a
        ``ValueError`` names those the frame lacks), else every column but ``by`` and
        ``order_by``. Without ``order_by`` the rows of a set are read, after the shuffle, in
        the order of the frame's index (a shuffle does not keep the row order, and the order it
        gives varies from one computation to the next), as :func:`fit` reads them: where the
        order matters (k-mers, positions) and the index does not give it, pass ``order_by``.
    method : {"transform", "predict", "predict_proba", "decision_function"}
        What to compute.
    partitioned : bool, default=False
        The frame is already partitioned by set (all rows of a set in one partition): skip the
        shuffle on ``by`` (the rows are then read in the partitions' order). The id column alone
        is read first to check it: a set with rows in two partitions raises a ``ValueError``
        naming it (at compute time).

    Returns
    -------
    dask.dataframe.DataFrame
        One row per set, indexed by set id (for Bag items without ids: ``partition * 2**32 +
        position``). A Bag's output is typed with integer ids (its ids are not known before
        it is computed): with ids of another type (strings) ``.compute()`` gives them as they
        are, and a writer that reads the type first (``to_parquet``) needs the frame's
        ``meta`` set to them (``.map_partitions(lambda p: p, meta=...)``). The columns and their
        dtype are those of the estimator's own output, computed on the client from one probe
        set of random elements: ``transform``, the
        estimator's ``get_feature_names_out``; ``predict``, ``prediction`` (``prediction_<i>``
        for several outputs: multi-output regression, multi-label classification);
        ``predict_proba`` / ``decision_function``, ``proba_<class>`` / ``decision_<class>``
        (``decision``, one column, for a binary classifier whose ``decision_function`` is 1-D;
        ``proba_<output>_<class>`` for a list of arrays, one per output). A float64 model's
        output stays float64. Lazy: nothing runs until ``.compute()``, ``.to_parquet(...)``,
        ``.persist()``.
    """
    import dask
    import dask.bag as db
    import dask.dataframe as dd

    _partitions.check_method(method)
    local = _local(estimator)
    _partitions.check_transformable(local, method)
    shared = estimator if local is not estimator else dask.delayed(estimator, pure=True)

    if isinstance(data, dd.DataFrame):
        if not isinstance(by, str):
            raise ValueError("by= must name the set-id column of the frame.")
        if by not in data.columns:
            raise ValueError(f"by={by!r} is not a column of the frame.")
        if columns is None:
            columns = _partitions.fitted_columns(local, data.columns, by)
        names, dtype = _partitions.output_schema(local, method)
        meta = _partitions.empty_output(names, dtype, by, data[by].dtype)
        unique = None
        if partitioned:  # every set in one partition: checked on the id column alone
            unique = dask.delayed(_partitions.check_unique)(
                [dask.delayed(_partitions.ids_of)(p, by) for p in data[[by]].to_delayed()], by)
        else:
            data = data.shuffle(on=by)
        return data.map_partitions(_partitions.frame_partition, shared, by, columns, order_by, method,
                                   names, meta, unique, meta=meta, align_dataframes=False)
    if isinstance(data, db.Bag):
        names, dtype = _partitions.output_schema(local, method)
        # the ids of plain arrays, and integer ids, are int64 (parquet writers read the type here)
        meta = _partitions.empty_output(names, dtype, "set", np.int64)
        parts = [dask.delayed(_partitions.bag_partition)(p, shared, i, method, names, meta)
                 for i, p in enumerate(data.to_delayed())]
        return dd.from_delayed(parts, meta=meta, verify_meta=False)
    raise TypeError(f"data must be a dask DataFrame or Bag, got {type(data).__name__}; for "
                    "sets in memory call the estimator itself (or skset.utils.iter_transform).")


def _local(estimator):
    """The estimator itself, or the result of a ``distributed`` Future of one."""
    try:
        from distributed import Future
    except ImportError:
        return estimator
    return estimator.result() if isinstance(estimator, Future) else estimator


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
    import dask

    try:  # its configuration (the nanny's environment) is defined when it is imported
        import distributed  # noqa: F401
    except ImportError as exc:
        raise ImportError("worker_allocator configures the workers of dask.distributed, which is "
                          "not installed: pip install skset[dask].") from exc
    env = dict(WORKER_ALLOCATOR)
    for name, value in overrides.items():
        if not name or "=" in name or "\x00" in name:  # before any variable is set
            raise ValueError(f"worker_allocator: {name!r} cannot name an environment variable "
                             "(empty, or holding '=' or a NUL character).")
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
        :func:`skset.sets_from_frame`); by default the columns a fitted estimator was fitted on
        (its first step's ``feature_names_in_``: a later ``fit`` continues the model on the same
        features, by name), else every column but ``by``, ``order_by`` and a label column ``y``
        (which ``columns`` may not list). The feature columns are recorded as the first step's
        ``feature_names_in_``: :func:`transform` reads the same ones.
    y : str, pandas.Series, dask Series or None
        The labels, one per set: for a frame, the name of a column that is constant within each
        set (a set whose rows disagree, or whose label is missing, raises a ``ValueError``
        naming it), or a Series indexed by set id (each id once)
        (a dask Series is computed once: one value per set); for a Bag of pairs, a Series
        indexed by set id. ``None``: unsupervised (or labels in the Bag's triples).
    classes : array-like or None
        Every class of the stream, for a classifier's first ``partial_fit`` (required then).
    epochs : int, default=1
        Passes over the partitions.
    partitioned : bool, default=False
        The frame is already partitioned by set (all rows of a set in one partition): each
        partition is read as it is, after the id column alone is read to check it (a set with
        rows in two partitions raises a ``ValueError`` naming it before any step learns).
        Otherwise the frame is shuffled on ``by``; with a ``distributed`` client the shuffled
        frame is persisted on the workers once (the epochs do not repeat the shuffle); with a
        local scheduler it is not (that would hold it in this process), and each shuffled
        partition, brought to the client in turn, reads the whole frame again (a frame of ``p``
        partitions is read about ``p`` times an epoch: for large frames use a ``distributed``
        client, e.g. a ``LocalCluster``, or ``partitioned=True``). A shuffled partition is
        read in the order of its set ids, each set's rows in the frame's index order (rows of
        one index value, as ``read_csv`` gives them, by their values; then ``order_by``), so
        that the same frame gives the same fit on every run.

    Returns
    -------
    estimator
        The estimator given, fitted. A collection without any set (every partition empty)
        raises a ``ValueError``, as ``fit([])`` does.

    See Also
    --------
    transform : the fitted estimator applied to the collection, partition by partition.
    skset.utils.partial_fit : one chunk in memory.
    """
    import dask.bag as db
    import dask.dataframe as dd

    partial_fit_steps(estimator)  # every step can learn from chunks: fail before any work
    if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or epochs < 1:
        raise ValueError(f"epochs must be a positive integer, got {epochs!r}.")
    labels = None
    if y is not None and not isinstance(y, str):
        labels = y.compute() if hasattr(y, "compute") else y
        _partitions.check_label_series(labels)
    recorded = None
    if isinstance(data, dd.DataFrame):
        if not isinstance(by, str):
            raise ValueError("by= must name the set-id column of the frame.")
        for name, col in (("by", by), ("y", y if isinstance(y, str) else None)):
            if col is not None and col not in data.columns:
                raise ValueError(f"{name}={col!r} is not a column of the frame.")
        if columns is None:  # a fitted model reads the columns it was fitted on, by name
            columns = _partitions.fitted_columns(estimator, data.columns, by)
        columns = recorded = _partitions.default_columns(data.columns, by, columns, order_by, y)
        if partitioned:  # every set in one partition, checked before any step learns (transform's)
            import dask

            _partitions.check_unique(dask.compute(*[dask.delayed(_partitions.ids_of)(p, by)
                                                    for p in data[[by]].to_delayed()]), by)
        else:  # kept on the workers (not with a local scheduler: in this process)
            data = data.shuffle(on=by)
            data = data if _client() is None else data.persist()

        def chunks():
            for pdf in _computed(data.to_delayed()):  # one graph, optimised once
                if len(pdf) == 0:
                    continue
                if not partitioned:  # the shuffle's row order varies from run to run
                    pdf = _partitions.in_id_order(pdf, by)
                yield _partitions.frame_chunk(pdf, by, columns, order_by, y, labels)
    elif isinstance(data, db.Bag):
        if isinstance(y, str):
            raise ValueError("y as a column name needs a frame; for a Bag pass a Series indexed "
                             "by set id, or (set_id, array, label) items.")

        def chunks():
            for part, items in enumerate(_computed(data.to_delayed())):
                if len(items):
                    yield _partitions.bag_chunk(list(items), labels, part)
    else:
        raise TypeError(f"data must be a dask DataFrame or Bag, got {type(data).__name__}; for "
                        "sets in memory call partial_fit (or skset.utils.partial_fit) per chunk.")
    for _ in range(int(epochs)):
        n_sets = 0
        for sets, labels_of, ids in chunks():
            try:
                utils.partial_fit(estimator, sets, labels_of, classes=classes)
            except ValueError as exc:  # "set 3" of the chunk: named by its id, as transform does
                utils._name_set(exc, ids)
                raise
            n_sets += len(sets)
        if n_sets == 0:  # as fit([]) in memory
            raise ValueError("the collection holds no set (every partition is empty); there is "
                             "nothing to fit.")
    if recorded is not None:  # what transform reads from a frame when columns is not given
        _partitions.record_columns(estimator, recorded)
    return estimator
