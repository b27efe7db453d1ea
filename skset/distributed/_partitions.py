"""What any distributed backend reuses, with no backend imported: one partition of sets (a
pandas frame in long format, or a list of Bag-like items) turned into sets and labels, a fitted
estimator applied to it and its output turned back into a pandas frame indexed by set id, the
output's schema (column names and dtype, computed on the client from one probe set), the labels
of a partition's sets (a constant column, a Series indexed by set id, or ``(id, array, label)``
items) and the checks that name the set at fault.

A driver (:mod:`._dask`; a Ray or Spark one would do the same) moves partitions and the fitted
estimator between processes and calls these functions on each partition; each works on pandas
frames, numpy arrays and lists only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.utils.validation import check_is_fitted

from .._frames import sets_from_frame
from .._sets import kmer_width
from .._steps import final_step, first_step, output_rows
from ..utils import iter_transform

__all__ = ["METHODS", "apply", "bag_chunk", "bag_partition", "bag_sets", "check_label_series",
           "check_method", "check_transformable", "check_unique", "default_columns", "empty_output",
           "fitted_columns", "frame_chunk", "frame_labels", "frame_partition", "ids_of", "in_id_order",
           "lookup", "output_schema", "record_columns"]

METHODS = ("transform", "predict", "predict_proba", "decision_function")


# -- the output: schema, one partition's frame -----------------------------------------------------
def check_method(method: str) -> None:
    """A ``ValueError`` unless ``method`` is one of :data:`METHODS`."""
    if method not in METHODS:
        raise ValueError(f"method={method!r} must be one of {METHODS}.")


def check_transformable(local, method: str) -> None:
    """The checks made on the client before any partition is read: the estimator's output has
    one row per set (its final step's declared ``_output_rows``), it has ``method`` and is
    fitted."""
    if output_rows(local) == "element":
        raise TypeError(f"{type(final_step(local)).__name__} maps elements, not sets: put it in a "
                        "Pipeline that ends in a set-level step (OTKEmbedding, a classifier...).")
    if not hasattr(local, method):
        raise TypeError(f"{type(local).__name__} has no {method}().")
    check_is_fitted(local)


def probe_set(local) -> np.ndarray:
    """A set of random elements with the features the estimator was fitted on (enough of them
    for any k-mer window of its steps): what the output schema is computed from."""
    d = getattr(local, "n_features_in_", None)
    if not isinstance(d, (int, np.integer)):
        raise TypeError(f"{type(local).__name__} has no n_features_in_: the number of features "
                        "of a set is needed to compute the output's columns.")
    steps = [s for _, s in local.steps] if hasattr(local, "steps") else [local]
    window = max([kmer_width(s) for s in steps] + [1])
    return np.random.default_rng(0).normal(size=(max(8, 2 * window), int(d)))


def as_2d(out, what: str) -> np.ndarray:
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


def output_schema(estimator, method: str) -> tuple[list[str], np.dtype]:
    """Column names and dtype of ``method``'s output, computed from the estimator's actual
    output on one probe set (:func:`probe_set`): a binary ``decision_function`` is one column,
    multi-output predictions one column per output, and the dtype is the output's own. The
    class columns are named after ``classes_`` (scikit-learn's order of the columns of
    ``predict_proba`` and ``decision_function``)."""
    what = f"{type(estimator).__name__}.{method}"
    out = getattr(estimator, method)([probe_set(estimator)])
    arr = as_2d(out, what)
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


def empty_output(names, dtype, index_name, index_dtype) -> pd.DataFrame:
    """The output frame of no set: the columns ``names`` of ``dtype``, an empty index of set ids
    (the ``meta`` of a lazy frame, and the output of an empty partition)."""
    return pd.DataFrame({n: pd.Series(dtype=dtype) for n in names},
                        index=pd.Index([], name=index_name, dtype=index_dtype))


def apply(estimator, sets, ids, index_name, method, names) -> pd.DataFrame:
    """``method`` of the fitted estimator on the sets of one partition (chunks of 1,024 sets:
    faster than one big call), as a frame indexed by the sets' ``ids``, with the columns
    ``names`` of the schema; a ``ValueError`` when the partition's output has another width."""
    what = f"{type(estimator).__name__}.{method}"
    out = np.concatenate([as_2d(o, what) for o in iter_transform(estimator, sets, method=method,
                                                                ids=ids)])
    if out.shape[1] != len(names):
        raise ValueError(f"{what} returned {out.shape[1]} columns on a partition but "
                         f"{len(names)} on the probe set the output's columns were computed "
                         "from.")
    index = pd.Index(ids, name=index_name, tupleize_cols=False)  # tuple ids stay one level
    return pd.DataFrame(out, index=index, columns=names)


def frame_partition(pdf, estimator, by, columns, order_by, method, names, meta, unique=None):
    """The output of one partition of a long frame (every row of each of its sets in it); ``meta``
    (:func:`empty_output`) when it is empty. ``unique`` is the result of :func:`check_unique`,
    passed so that a backend computes that check first (``partitioned=True``); ``None``: the
    partition comes out of a shuffle, whose row order varies from one computation to the next,
    and its rows are read in :func:`in_id_order` (within a set, the frame's index order), as
    ``fit`` reads them."""
    if len(pdf) == 0:
        return meta
    if unique is None:
        pdf = in_id_order(pdf, by)
    sets, ids = sets_from_frame(pdf, by=by, columns=columns, order_by=order_by)
    return apply(estimator, sets, ids, by, method, names).astype(meta.dtypes.to_dict())


def ids_of(pdf, by) -> np.ndarray:
    """The distinct set ids of one partition."""
    return pd.unique(pdf[by].to_numpy()) if len(pdf) else np.empty(0, dtype=object)


def check_unique(parts, by) -> bool:
    """``partitioned=True``: a ``ValueError`` naming a set whose rows lie in two partitions
    (``parts``: the :func:`ids_of` each partition)."""
    ids = pd.Series(np.concatenate([np.asarray(p, dtype=object) for p in parts]) if parts
                    else np.empty(0, dtype=object))
    where = np.repeat(np.arange(len(parts)), [len(p) for p in parts])
    dup = ids.duplicated(keep=False).to_numpy()
    if dup.any():
        sid = ids[dup].iloc[0]
        straddling(sid, *where[dup & (ids == sid).to_numpy()][:2], by)
    return True


def straddling(sid, first: int, second: int, by):
    """Raise the ``ValueError`` of a set whose rows lie in two partitions."""
    raise ValueError(
        f"partitioned=True, but set {sid!r} has rows in partitions {first} and {second}: "
        f"it would be cut into two sets of the same id. Leave partitioned=False (the frame "
        f"is then shuffled on by={by!r}), or repartition it by set.")


def bag_sets(items, part: int, what: str):
    """``(ids, sets)`` of a Bag partition: every item an ``(id, array)`` pair, or every item an
    array (its id is then ``part * 2**32 + position``); a ``TypeError`` names the first item
    that breaks the rule."""
    for j, it in enumerate(items):
        pair_as_list = isinstance(it, list) and len(it) in (2, 3) and np.ndim(it[0]) == 0 \
            and np.ndim(it[1]) == 2  # [id, array]: a set of 2 elements has two rows, no scalar
        if pair_as_list or isinstance(it, (dict, str, bytes)):
            raise TypeError(f"{what}: item {j} of partition {part} is a {type(it).__name__}"
                            f"{' [id, array]' if pair_as_list else ''}; every item of a Bag must "
                            "be an (id, array) tuple, or every item an array.")
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


def bag_partition(items, estimator, part, method, names, meta):
    """The output of Bag partition number ``part`` (its items: see :func:`bag_sets`)."""
    items = list(items)
    if not items:
        return meta
    ids, sets = bag_sets(items, part, "transform")
    return apply(estimator, sets, ids, meta.index.name, method, names).astype(
        meta.dtypes.to_dict())


# -- the feature columns of a frame --------------------------------------------------------------
def fitted_columns(local, frame_columns, by):
    """The feature columns a frame's sets are read from when ``columns`` is not given: those the
    estimator was fitted on (``feature_names_in_``, which :func:`record_columns` records), or
    ``None`` (every column but ``by`` and ``order_by``)."""
    fitted = getattr(first_step(local), "feature_names_in_", None)
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


def default_columns(frame_columns, by, columns, order_by, y) -> list:
    """The feature columns a fit reads from a frame: ``columns``, or every column but ``by``,
    ``order_by`` and a label column ``y`` (which ``columns`` may not list)."""
    if columns is None:
        skip = {by, *([y] if isinstance(y, str) else []),
                *([order_by] if isinstance(order_by, str) else order_by or [])}
        columns = [c for c in frame_columns if c not in skip]
    elif isinstance(y, str) and y in ([columns] if isinstance(columns, str) else columns):
        raise ValueError(f"y={y!r} is the label column and is also listed in columns: a "
                         "label cannot be a feature; leave it out of columns.")
    return columns


def record_columns(estimator, columns) -> None:
    """Record the feature columns a fit read as the first step's ``feature_names_in_``: what
    :func:`fitted_columns` reads back when a transform is not given ``columns``."""
    names = [columns] if isinstance(columns, str) else list(columns)
    first_step(estimator).feature_names_in_ = np.asarray(names, dtype=object)


# -- the labels of a partition's sets -------------------------------------------------------------
def frame_labels(pdf, by, label, ids) -> np.ndarray:
    """The label of each set ``ids`` of a partition from its column ``label``: one value per set,
    or a ``ValueError`` naming a set whose rows disagree."""
    grouped = pdf[label].groupby(pdf[by].to_numpy(), sort=False)  # an index named like by too
    n = grouped.nunique(dropna=False)
    bad = n.index[n.to_numpy() > 1]
    if len(bad):
        raise ValueError(f"y={label!r} must be constant within each set; set {bad[0]!r} has "
                         f"{int(n.loc[bad[0]])} different values.")
    return no_missing(grouped.first().loc[ids].to_numpy(), ids)


def no_missing(values, ids) -> np.ndarray:
    """``values`` (one label per set ``ids``) as an array; a ``ValueError`` names the first set
    whose label is missing (NaN, None)."""
    values = np.asarray(values)
    rows = np.asarray(values, dtype=object).reshape(len(ids), -1)  # several outputs: a row a set
    missing = np.flatnonzero(pd.isna(rows).any(1))
    if len(missing):
        raise ValueError(f"y has no value (NaN or None) for set {ids[missing[0]]!r} "
                         f"({len(missing)} set(s) of this partition); give every set a label.")
    return values


def lookup(labels, ids) -> np.ndarray:
    """``labels`` (a pandas Series indexed by set id) of the sets ``ids``."""
    missing = pd.Index(ids).difference(labels.index)
    if len(missing):
        raise ValueError(f"y has no label for {len(missing)} set(s), e.g. set {missing[0]!r}.")
    return no_missing(labels.loc[ids].to_numpy(), ids)


def check_label_series(labels) -> None:
    """A ``TypeError`` unless ``labels`` is a pandas Series; a ``ValueError`` naming a set id
    that it holds twice."""
    if not isinstance(labels, pd.Series):
        raise TypeError("y must be a column name (frames), a pandas or dask Series indexed "
                        f"by set id, or None; got {type(labels).__name__}.")
    dup = labels.index[labels.index.duplicated()]
    if len(dup):
        raise ValueError(f"y holds set {dup[0]!r} {int((labels.index == dup[0]).sum())} times "
                         f"({len(dup.unique())} duplicated id(s) in all); give one label per "
                         "set id.")


def in_id_order(pdf, by):
    """The rows of a shuffled partition in a fixed order: by set id, then (within a set) by the
    frame's index, then, where rows still tie (an index that repeats, as ``read_csv`` or
    ``concat`` give), by their values, column by column. A shuffle's row order within a
    partition is not reproducible from one computation to the next (it follows the order its
    tasks ran in); read as it comes, the same frame would stream its sets, and the rows of each
    set, in another order each time, and a fit that depends on the order (``SGDClassifier``,
    k-means++ seeding) would differ from run to run. Rows that tie on every key are equal, so
    their order does not matter. Keys are taken as arrays, not looked up by name (an index
    named like ``by`` is not ambiguous); a key that cannot be sorted (ids of mixed types) is
    left out."""
    n = len(pdf)
    key = pd.DataFrame({0: pdf[by].to_numpy(), 1: pdf.index.to_numpy()}, index=np.arange(n))
    usable = [c for c in key.columns if _sortable(key[c])]
    if key.duplicated(usable).any():  # ties within a set: its rows' values decide
        for j in range(pdf.shape[1]):
            col = pd.Series(pdf.iloc[:, j].to_numpy(), index=key.index)
            if _sortable(col):
                key[2 + j] = col
                usable.append(2 + j)
    if not usable:
        return pdf
    return pdf.iloc[key.sort_values(usable, kind="stable").index.to_numpy()]


def _sortable(col) -> bool:
    """Whether ``col`` sorts: only an object column can fail (values of mixed types); the others
    are not sorted to find out."""
    if col.dtype != object:
        return True
    try:
        col.sort_values(kind="stable")
    except TypeError:
        return False
    return True


def frame_chunk(pdf, by, columns, order_by, y, labels):
    """``(sets, y, ids)`` of one partition of a long frame for a fit: the labels from the
    constant column ``y`` (a name), from ``labels`` (a Series indexed by set id), or ``None``."""
    sets, ids = sets_from_frame(pdf, by=by, columns=columns, order_by=order_by)
    return sets, (frame_labels(pdf, by, y, ids) if isinstance(y, str)
                  else None if labels is None else lookup(labels, ids)), list(ids)


def bag_chunk(items, labels, part):
    """``(sets, y, ids)`` of a Bag partition: ``(id, array)`` pairs (labels looked up in
    ``labels``), ``(id, array, label)`` triples, or plain arrays (no labels; ids as
    :func:`bag_sets` gives them); a ``TypeError`` names an item that breaks the rule."""
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
        return [np.asarray(it[1]) for it in items], no_missing([it[2] for it in items], ids), ids
    ids, sets = bag_sets(items, part, "fit")
    if any(isinstance(it, tuple) for it in items):
        return sets, None if labels is None else lookup(labels, ids), list(ids)
    if labels is not None:
        raise ValueError("y needs set ids: give the Bag (set_id, array) pairs, or (set_id, "
                         "array, label) triples.")
    return sets, None, list(ids)
