"""Inference past one machine: a fitted skset estimator applied to sets stored on a dask cluster.

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
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.utils.validation import check_is_fitted

from ._frames import sets_from_frame

__all__ = ["transform"]

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
