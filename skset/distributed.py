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


def _probe_set(local) -> np.ndarray:
    """A set of random elements with the features the estimator was fitted on (enough of them
    for any k-mer window of its steps): what the output schema is computed from."""
    d = getattr(local, "n_features_in_", None)
    if not isinstance(d, (int, np.integer)):
        raise TypeError(f"{type(local).__name__} has no n_features_in_: the number of features "
                        "of a set is needed to compute the output's columns.")
    steps = [s for _, s in local.steps] if hasattr(local, "steps") else [local]
    window = max([int(w) for w in (getattr(s, "window", 1) for s in steps)
                  if isinstance(w, (int, np.integer))] + [1])
    return np.random.default_rng(0).normal(size=(max(8, 2 * window), int(d)))


def _as_2d(out, what: str) -> np.ndarray:
    """``method``'s output as one ``(n_sets, n_columns)`` array: a 1-D output is one column, a
    list of 2-D arrays (scikit-learn's multi-output ``predict_proba``) is put side by side."""
    if isinstance(out, list) and out and all(np.ndim(o) == 2 for o in out):
        return np.hstack([np.asarray(o) for o in out])
    out = np.asarray(out)
    if out.ndim == 1:
        return out[:, None]
    if out.ndim != 2:
        raise ValueError(f"{what} returned an array of shape {out.shape}; skset.distributed "
                         "needs one row per set (a 1-D or 2-D output).")
    return out


def _output_schema(estimator, method: str) -> tuple[list[str], np.dtype]:
    """Column names and dtype of ``method``'s output, computed from the estimator's actual
    output on one probe set (:func:`_probe_set`): a binary ``decision_function`` is one column,
    multi-output predictions one column per output, and the dtype is the output's own."""
    what = f"{type(estimator).__name__}.{method}"
    out = getattr(estimator, method)([_probe_set(estimator)])
    arr = _as_2d(out, what)
    k = arr.shape[1]
    classes = getattr(estimator, "classes_", None)
    if method == "transform":
        names = None
        if hasattr(estimator, "get_feature_names_out"):
            try:
                names = [str(n) for n in estimator.get_feature_names_out()]
            except (AttributeError, TypeError, ValueError):
                names = None
        if names is None or len(names) != k:
            names = [f"x{i}" for i in range(k)]
    elif method == "predict":
        names = ["prediction"] if k == 1 else [f"prediction_{i}" for i in range(k)]
    else:
        prefix = "proba" if method == "predict_proba" else "decision"
        if isinstance(out, list):  # one array per output: <prefix>_<output>_<class>
            per = [np.asarray(c) for c in classes] if isinstance(classes, list) and len(
                classes) == len(out) else [np.arange(np.shape(o)[1]) for o in out]
            names = [f"{prefix}_{j}_{c}" for j, cs in enumerate(per) for c in cs]
            if len(names) != k:
                names = [f"{prefix}_{i}" for i in range(k)]
        elif k == 1:  # a binary decision_function: the score of classes_[1]
            names = [prefix]
        elif classes is not None and np.ndim(classes) == 1 and len(classes) == k:
            names = [f"{prefix}_{c}" for c in classes]
        else:
            names = [f"{prefix}_{i}" for i in range(k)]
    return names, arr.dtype


def _apply(estimator, sets, ids, index_name, method, names):
    from .utils import iter_transform  # chunks of 1,024 sets: faster than one big call

    what = f"{type(estimator).__name__}.{method}"
    out = np.concatenate([_as_2d(o, what) for o in iter_transform(estimator, sets, method=method)])
    if out.shape[1] != len(names):
        raise ValueError(f"{what} returned {out.shape[1]} columns on a partition but "
                         f"{len(names)} on the probe set the output's columns were computed "
                         "from.")
    index = pd.Index(ids, name=index_name)
    return pd.DataFrame(out, index=index, columns=names)


def _frame_partition(pdf, estimator, by, columns, order_by, method, names, meta, unique=None):
    if len(pdf) == 0:
        return meta
    sets, ids = sets_from_frame(pdf, by=by, columns=columns, order_by=order_by)
    return _apply(estimator, sets, ids, by, method, names).astype(meta.dtypes.to_dict())


def _ids_of(pdf, by) -> np.ndarray:
    """The distinct set ids of one partition."""
    return pd.unique(pdf[by].to_numpy()) if len(pdf) else np.empty(0, dtype=object)


def _check_unique(parts, by) -> bool:
    """``partitioned=True``: a ``ValueError`` naming a set whose rows lie in two partitions."""
    ids = pd.Series(np.concatenate([np.asarray(p, dtype=object) for p in parts]) if parts
                    else np.empty(0, dtype=object))
    where = np.repeat(np.arange(len(parts)), [len(p) for p in parts])
    dup = ids.duplicated(keep=False).to_numpy()
    if dup.any():
        sid = ids[dup].iloc[0]
        first, second = where[dup & (ids == sid).to_numpy()][:2]
        raise ValueError(
            f"partitioned=True, but set {sid!r} has rows in partitions {first} and {second}: "
            f"it would be cut into two sets of the same id. Leave partitioned=False (the frame "
            f"is then shuffled on by={by!r}), or repartition it by set.")
    return True


def _bag_sets(items, part: int, what: str):
    """``(ids, sets)`` of a Bag partition: every item an ``(id, array)`` pair, or every item an
    array (its id is then ``part * 2**32 + position``); a ``TypeError`` names the first item
    that breaks the rule."""
    pairs = [isinstance(it, tuple) for it in items]
    if any(pairs):
        for j, it in enumerate(items):
            if not (isinstance(it, tuple) and len(it) == 2):
                kind = (f"a tuple of {len(it)}" + (" ((id, array, label): labels are for fit)"
                                                   if len(it) == 3 else "")
                        if isinstance(it, tuple) else f"a {type(it).__name__} among pairs")
                raise TypeError(f"{what}: item {j} of partition {part} is {kind}; every item of "
                                "a Bag must be an (id, array) pair, or every item an array.")
        return [it[0] for it in items], [np.asarray(it[1]) for it in items]
    return [(part << 32) | j for j in range(len(items))], list(items)


def _bag_partition(items, estimator, part, method, names, meta):
    items = list(items)
    if not items:
        return meta
    ids, sets = _bag_sets(items, part, "transform")
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
        :func:`skset.sets_from_frame`). By default the columns the estimator was fitted on when
        they are known (its first step's ``feature_names_in_``, which :func:`fit` records; a
        ``ValueError`` names those the frame lacks), else every column but ``by`` and
        ``order_by``.
    method : {"transform", "predict", "predict_proba", "decision_function"}
        What to compute.
    partitioned : bool, default=False
        The frame is already partitioned by set (all rows of a set in one partition): skip the
        shuffle on ``by``. The id column alone is read first to check it: a set with rows in
        two partitions raises a ``ValueError`` naming it (at compute time).

    Returns
    -------
    dask.dataframe.DataFrame
        One row per set, indexed by set id (for Bag items without ids: ``partition * 2**32 +
        position``). The columns and their dtype are those of the estimator's own output,
        computed on the client from one probe set of random elements: ``transform``, the
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
    shared = estimator if local is not estimator else dask.delayed(estimator, pure=True)

    if isinstance(data, dd.DataFrame):
        if not isinstance(by, str):
            raise ValueError("by= must name the set-id column of the frame.")
        if by not in data.columns:
            raise ValueError(f"by={by!r} is not a column of the frame.")
        if columns is None:
            columns = _fitted_columns(local, data.columns, by)
        names, dtype = _output_schema(local, method)
        meta = pd.DataFrame({n: pd.Series(dtype=dtype) for n in names},
                            index=pd.Index([], name=by, dtype=data[by].dtype))
        unique = None
        if partitioned:  # every set in one partition: checked on the id column alone
            unique = dask.delayed(_check_unique)(
                [dask.delayed(_ids_of)(p, by) for p in data[[by]].to_delayed()], by)
        else:
            data = data.shuffle(on=by)
        return data.map_partitions(_frame_partition, shared, by, columns, order_by, method,
                                   names, meta, unique, meta=meta, align_dataframes=False)
    if isinstance(data, db.Bag):
        names, dtype = _output_schema(local, method)
        meta = pd.DataFrame({n: pd.Series(dtype=dtype) for n in names},
                            index=pd.Index([], name="set", dtype=object))
        parts = [dask.delayed(_bag_partition)(p, shared, i, method, names, meta)
                 for i, p in enumerate(data.to_delayed())]
        return dd.from_delayed(parts, meta=meta, verify_meta=False)
    raise TypeError(f"data must be a dask DataFrame or Bag, got {type(data).__name__}; for "
                    "sets in memory call the estimator itself (or skset.utils.iter_transform).")


def _first_step(estimator):
    """The first step of a pipeline (``passthrough`` steps left out), or the estimator."""
    if not hasattr(estimator, "steps"):
        return estimator
    steps = [s for _, s in estimator.steps
             if s is not None and not (isinstance(s, str) and s == "passthrough")]
    return steps[0] if steps else estimator


def _fitted_columns(local, frame_columns, by):
    """The feature columns a frame's sets are read from when ``columns`` is not given: those the
    estimator was fitted on (``feature_names_in_``, which :func:`fit` records), or ``None``
    (every column but ``by`` and ``order_by``)."""
    fitted = getattr(_first_step(local), "feature_names_in_", None)
    if fitted is None:
        return None
    fitted = [str(c) for c in fitted]
    missing = [c for c in fitted if c not in frame_columns]
    if missing:
        raise ValueError(f"the estimator was fitted on the feature columns {fitted}, and the frame "
                         f"has no column(s) {missing}; pass columns=[...] to choose others.")
    if by in fitted:
        raise ValueError(f"by={by!r} is one of the feature columns the estimator was fitted on "
                         f"({fitted}); pass columns=[...].")
    return fitted


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
    return _no_missing(grouped.first().loc[ids].to_numpy(), ids)


def _no_missing(values, ids) -> np.ndarray:
    """``values`` (one label per set ``ids``) as an array; a ``ValueError`` names the first set
    whose label is missing (NaN, None)."""
    missing = np.flatnonzero(pd.isna(np.asarray(values, dtype=object)))
    if len(missing):
        raise ValueError(f"y has no value (NaN or None) for set {ids[missing[0]]!r} "
                         f"({len(missing)} set(s) of this partition); give every set a label.")
    return np.asarray(values)


def _lookup(labels, ids) -> np.ndarray:
    """``labels`` (a pandas Series indexed by set id) of the sets ``ids``."""
    missing = pd.Index(ids).difference(labels.index)
    if len(missing):
        raise ValueError(f"y has no label for {len(missing)} set(s), e.g. set {missing[0]!r}.")
    return _no_missing(labels.loc[ids].to_numpy(), ids)


def _check_label_series(labels) -> None:
    """A ``ValueError`` naming a set id that a Series of labels holds twice."""
    dup = labels.index[labels.index.duplicated()]
    if len(dup):
        raise ValueError(f"y holds set {dup[0]!r} {int((labels.index == dup[0]).sum())} times "
                         f"({len(dup.unique())} duplicated id(s) in all); give one label per "
                         "set id.")


def _bag_chunk(items, labels, part):
    """``(sets, y)`` of a Bag partition: ``(id, array)`` pairs (labels looked up in
    ``labels``), ``(id, array, label)`` triples, or plain arrays (no labels); a ``TypeError``
    names an item that breaks the rule."""
    if any(isinstance(it, tuple) and len(it) == 3 for it in items):
        for j, it in enumerate(items):
            if not (isinstance(it, tuple) and len(it) == 3):
                raise TypeError(f"fit: item {j} of partition {part} is not an (id, array, "
                                "label) triple, as the others are; every item of a Bag must be "
                                "the same kind.")
        if labels is not None:
            raise ValueError("the Bag's items carry their labels ((id, array, label)): leave y "
                             "out.")
        ids = [it[0] for it in items]
        return [np.asarray(it[1]) for it in items], _no_missing([it[2] for it in items], ids)
    ids, sets = _bag_sets(items, part, "fit")
    if any(isinstance(it, tuple) for it in items):
        return sets, None if labels is None else _lookup(labels, ids)
    if labels is not None:
        raise ValueError("y needs set ids: give the Bag (set_id, array) pairs, or (set_id, "
                         "array, label) triples.")
    return sets, None


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
        label column ``y`` (which ``columns`` may not list). The feature columns are recorded
        as the first step's ``feature_names_in_``: :func:`transform` reads the same ones.
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
        partition is read as it is. Otherwise the frame is shuffled on ``by``; with a
        ``distributed`` client the shuffled frame is persisted on the workers once (the epochs
        do not repeat the shuffle); with a local scheduler it is not (that would hold it in this
        process), and each partition repeats its part of the shuffle.

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
        _check_label_series(labels)
    names = None
    if isinstance(data, dd.DataFrame):
        if not isinstance(by, str):
            raise ValueError("by= must name the set-id column of the frame.")
        for name, col in (("by", by), ("y", y if isinstance(y, str) else None)):
            if col is not None and col not in data.columns:
                raise ValueError(f"{name}={col!r} is not a column of the frame.")
        if columns is None:
            skip = {by, *([y] if isinstance(y, str) else []),
                    *([order_by] if isinstance(order_by, str) else order_by or [])}
            columns = [c for c in data.columns if c not in skip]
        elif isinstance(y, str) and y in ([columns] if isinstance(columns, str) else columns):
            raise ValueError(f"y={y!r} is the label column and is also listed in columns: a "
                             "label cannot be a feature; leave it out of columns.")
        names = [columns] if isinstance(columns, str) else list(columns)
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
            for part, items in enumerate(_computed(data.to_delayed())):
                if len(items):
                    yield _bag_chunk(list(items), labels, part)
    else:
        raise TypeError(f"data must be a dask DataFrame or Bag, got {type(data).__name__}; for "
                        "sets in memory call partial_fit (or skset.utils.partial_fit) per chunk.")
    for _ in range(int(epochs)):
        n_sets = 0
        for sets, labels_of in chunks():
            partial_fit_chunk(estimator, sets, labels_of, classes=classes)
            n_sets += len(sets)
        if n_sets == 0:  # as fit([]) in memory
            raise ValueError("the collection holds no set (every partition is empty); there is "
                             "nothing to fit.")
    if names is not None:  # what transform reads from a frame when columns is not given
        _first_step(estimator).feature_names_in_ = np.asarray(names, dtype=object)
    return estimator
