"""Sets from long data frames, and per-element outputs back to frames.

Data often arrive as one long table: one row per element (a cell, a frame of an utterance, a
residue), a column saying which set (sample, utterance, protein) the row belongs to, and feature
columns. :func:`sets_from_frame` cuts such a table into skset's collection of sets;
:func:`frame_from_sets` puts per-element outputs (``NystromFeatures`` features, rows of a transport
plan, ``ABCClusterer`` labels) back into a frame, either a new long one or next to the rows they came
from. Both work on pandas and polars frames (and any eager frame narwhals supports) through
`narwhals <https://narwhals-dev.github.io/narwhals/>`_, and are vectorised: no Python loop runs
over rows, only over sets where a list of sets is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

__all__ = ["sets_from_frame", "frame_from_sets", "set_columns", "pandas_missing", "frame_numbers"]

#: ``True`` where an object array holds pandas' missing values (``NA``, ``NaT``): read as NaN
pandas_missing = np.frompyfunc(lambda v: type(v).__name__ in ("NAType", "NaTType"), 1, 1)


def frame_numbers(X) -> np.ndarray:
    """A data frame's values (``to_numpy()``): pandas' nullable numbers (``Float64``,
    ``Int64``), an object array there, as float64 with NaN where missing; other frames as they
    come."""
    arr = X.to_numpy()
    if arr.dtype == object and arr.ndim == 2 and all(
            isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
            or type(v).__name__ == "NAType" for v in arr.ravel().tolist()):
        arr = np.where(pandas_missing(arr).astype(bool), np.nan, arr).astype(np.float64)
    return arr


def set_columns(sets: list, name: str = "X", fitted=None) -> np.ndarray | None:
    """The column names of sets given as data frames (pandas, polars: every set a frame), or
    None. Sets whose columns differ, or differ from ``fitted`` (the names seen in ``fit``), raise
    a ``ValueError`` naming the set: their values would be read by position, silently wrong."""
    if not sets or not all(hasattr(s, "columns") and hasattr(s, "shape") for s in sets):
        return None
    names = [[str(c) for c in s.columns] for s in sets]
    for i, cols in enumerate(names):
        if cols != names[0]:
            raise ValueError(f"{name}: set {i} has the columns {cols} but set 0 has {names[0]}; "
                             "give every set the same columns in the same order.")
    if fitted is not None and names[0] != [str(c) for c in fitted]:
        raise ValueError(f"{name}: the sets have the columns {names[0]} but the estimator was "
                         f"fitted on {list(fitted)}; give them in that order.")
    return np.asarray(names[0], dtype=object)


def _to_frame(frame, name: str = "frame") -> nw.DataFrame:
    if isinstance(frame, nw.DataFrame):
        return frame
    try:
        return nw.from_native(frame, eager_only=True)
    except TypeError:
        pass
    kind = type(frame)
    what = f"{kind.__module__}.{kind.__qualname__}"
    hint = ""
    if hasattr(frame, "collect"):
        hint = " It looks lazy: call .collect() first."
    elif hasattr(frame, "to_frame"):
        hint = " It looks like a Series: call .to_frame() first."
    elif type(frame).__name__ == "AnnData":
        hint = (" For an AnnData, build a frame of its matrix and obs column: "
                "df = adata.to_df(); df['sample'] = adata.obs['sample'].to_numpy().")
    raise TypeError(f"{name} must be a data frame (pandas, polars, or another eager frame that "
                    f"narwhals supports), got {what}.{hint}") from None


def _names(arg, what: str, allow_none: bool = False, allow_empty: bool = True
           ) -> list[str] | None:
    if arg is None:
        if allow_none:
            return None
        raise ValueError(f"{what} is required (a column name or a list of column names).")
    if isinstance(arg, str):
        return [arg]
    try:
        names = list(arg)
    except TypeError:
        raise TypeError(f"{what} must be a column name or a list of column names, got "
                        f"{type(arg).__name__}.") from None
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"{what} must name columns by strings, got {names!r}.")
    if len(set(names)) != len(names):
        raise ValueError(f"{what} names a column twice: {names!r}.")
    if not names and not allow_empty:
        raise ValueError(f"{what} is empty; name at least one column (a column name or a list "
                         "of column names).")
    return names


def _check_present(df: nw.DataFrame, names: list[str], what: str) -> None:
    missing = [n for n in names if n not in df.columns]
    if missing:
        shown = df.columns if len(df.columns) <= 20 else [*df.columns[:20], "..."]
        raise ValueError(f"{what}: column(s) {missing} not in the frame; its columns are {shown}.")


def _fresh(df: nw.DataFrame, stem: str) -> str:
    name = stem
    while name in df.columns:
        name += "_"
    return name


def _pandas_codes(df: nw.DataFrame, by: list[str]) -> np.ndarray | None:
    """Set of each row by ``pandas.factorize`` (a hash table, codes in order of first appearance);
    -1 where a key is missing. ``None`` when the frame is not a pandas one."""
    if df.implementation is not nw.Implementation.PANDAS:
        return None
    import pandas as pd

    native = nw.to_native(df)
    codes = None
    for name in by:
        col, uniques = pd.factorize(native[name])
        if codes is None:
            codes = col.astype(np.int64, copy=False)
            continue
        missing = (codes < 0) | (col < 0)
        codes = pd.factorize(codes * len(uniques) + col)[0]  # stays in order of first appearance
        codes[missing] = -1
    return codes


def _with_missing(df: nw.DataFrame, names: list[str]) -> list[str]:
    """The columns of ``names`` holding a missing value: null, or NaN in a float column (pandas
    treats NaN as missing; polars keeps NaN as a value, distinct from null)."""
    if not names:
        return []
    schema = df.schema

    def missing(n):
        col = nw.col(n).is_null()
        return (col | nw.col(n).is_nan()) if schema[n].is_float() else col

    return [n for n, has in zip(names, df.select(missing(n).any() for n in names).row(0))
            if has]


def _group_rows(df: nw.DataFrame, by: list[str], order_by: list[str]):
    """Group the rows of ``df`` by ``by`` (sets in order of first appearance).

    Returns ``(id_columns, codes, perm, counts)``: the values of each ``by`` column for each set,
    the set of each row, the row positions in set order (within a set by ``order_by``, then by row
    position) and the number of rows of each set.
    """
    if len(df) == 0:
        raise ValueError("frame is empty (0 rows); there are no sets.")
    codes = _pandas_codes(df, by)
    null_checks = [("order_by", order_by)]
    if codes is None or codes.min() < 0:  # factorize marks a missing key by -1
        null_checks.insert(0, ("by", by))
    for what, names in null_checks:
        bad = _with_missing(df, names)
        if bad:
            raise ValueError(f"{what} column(s) {bad} have missing values (null/NaN); every row "
                             f"needs a {'set id' if what == 'by' else 'position'} (drop or fill them "
                             "first).")
    row = _fresh(df, "__skset_row")
    if codes is None:
        # a hash join gives every row its set; joins need not keep row order: scatter by row index
        code = _fresh(df, "__skset_set")
        keys = df.select(by).unique(keep="first", maintain_order=True).with_row_index(code)
        joined = df.select(by).with_row_index(row).join(keys, on=by, how="left")
        codes = np.empty(len(df), dtype=np.int64)
        codes[joined[row].to_numpy()] = joined[code].to_numpy()
    if (codes[1:] >= codes[:-1]).all():
        perm = np.arange(len(codes))  # rows already grouped, sets in order: the common case
    else:
        perm = _argsort_codes(codes)
    counts = np.bincount(codes)
    first_rows = perm[np.cumsum(counts) - counts]
    id_columns = [df[n][first_rows].to_list() for n in by]
    if order_by:
        # rows sorted by the order_by columns (ties by position), then stably by set
        first = _stable_order(df, order_by, row)
        perm = np.take(first, _argsort_codes(np.take(codes, first)))
    return id_columns, codes, perm, counts


def _stable_order(df: nw.DataFrame, order_by: list[str], row: str) -> np.ndarray:
    """Row positions sorted by the ``order_by`` columns, ties in row order."""
    schema = df.schema
    if all(schema[c].is_numeric() or schema[c].is_temporal() for c in order_by):
        keys = [df[c].to_numpy() for c in order_by]
        if all(k.dtype.kind in "biufmM" for k in keys):
            # numpy's stable sorts: several times faster than a multi-key sort of the frame
            if len(keys) == 1:
                return np.argsort(keys[0], kind="stable")
            return np.lexsort(keys[::-1])
    ranked = df.select(order_by).with_row_index(row).sort([*order_by, row])
    return ranked[row].to_numpy().astype(np.int64, copy=False)


def _argsort_codes(codes: np.ndarray) -> np.ndarray:
    """Stable argsort of small non-negative integer codes (radix sort up to 65,536 sets)."""
    if codes.max() < 2**16:
        return np.argsort(codes.astype(np.uint16), kind="stable")
    # unique keys (code, position): any sort is stable on them
    return np.argsort(codes * len(codes) + np.arange(len(codes)))


def _is_identity(perm: np.ndarray) -> bool:
    return bool((perm == np.arange(len(perm))).all())


def _format_ids(columns: list[list], as_tuples: bool) -> list:
    return list(zip(*columns)) if as_tuples else columns[0]


def sets_from_frame(
    frame: Any,
    by: str | Sequence[str],
    columns: Sequence[str] | None = None,
    order_by: str | Sequence[str] | None = None,
) -> tuple[list[np.ndarray], list]:
    """Cut a long data frame (one row per element) into a collection of sets.

    Every group of rows sharing the value(s) of ``by`` becomes one set: an ``(n_i, d)`` float array
    of its rows' ``columns``. Works on pandas and polars frames (through narwhals), without a Python
    loop over rows.

    Parameters
    ----------
    frame : pandas.DataFrame, polars.DataFrame or another eager frame narwhals supports
        The long table: one row per element.
    by : str or list of str
        The column(s) naming the set each row belongs to (e.g. ``"sample"``). With a list, ids
        are tuples.
    columns : list of str, optional
        The feature columns, in this order. Default: every column that is not in ``by`` or
        ``order_by``, in the frame's order. They must be numeric (or boolean).
    order_by : str or list of str, optional
        Column(s) giving the order of rows within a set (a time, a position in the sequence); the
        sort is stable, so ties keep the frame's order. Default: the frame's row order. The order
        matters for sequences: k-mers (``NystromFeatures(window=...)``) and positional weighting
        (``position_sigma``) read rows in this order; other estimators ignore it.

    Returns
    -------
    sets : list of ndarray of shape (n_i, d)
        One set per distinct value of ``by``, **in order of first appearance** in the frame (not
        sorted). float32 when every feature column is float32, else float64. The sets are views
        into one array holding all rows.
    ids : list
        The id of each set: its value of ``by`` (a tuple of values when ``by`` is a list), aligned
        with ``sets``; look labels up with it, e.g. ``labels.loc[ids]`` for a pandas Series
        indexed by sample.

    Raises
    ------
    TypeError
        ``frame`` is not a data frame, or a feature column is not numeric.
    ValueError
        A named column is missing, the frame has no rows or no feature columns, ``by`` or
        ``order_by`` has missing values, or a feature is NaN or infinite (the message names the
        set and the column).

    See Also
    --------
    frame_from_sets : per-element outputs back to a frame.

    Examples
    --------
    >>> import pandas as pd
    >>> from skset import sets_from_frame
    >>> cells = pd.DataFrame({"sample": ["b", "a", "b", "b", "a"],
    ...                       "CD4": [1.0, 2.0, 3.0, 4.0, 5.0], "CD8": [0.5, 0.1, 0.2, 0.3, 0.4]})
    >>> sets, ids = sets_from_frame(cells, by="sample")
    >>> ids
    ['b', 'a']
    >>> [s.shape for s in sets]
    [(3, 2), (2, 2)]
    >>> sets[1]
    array([[2. , 0.1],
           [5. , 0.4]])
    """
    df = _to_frame(frame)
    by_names = _names(by, "by", allow_empty=False)
    order_names = _names(order_by, "order_by", allow_none=True) or []
    _check_present(df, by_names, "by")
    _check_present(df, order_names, "order_by")
    keyed = set(by_names) | set(order_names)
    if columns is None:
        feature_names = [c for c in df.columns if c not in keyed]
        if not feature_names:
            raise ValueError(f"frame has no feature columns besides by={by_names} and "
                             f"order_by={order_names}.")
        unnamed = [c for c in feature_names if not isinstance(c, str)]
        if unnamed:  # pd.DataFrame(matrix): integer names, which the frame library refuses
            raise TypeError(f"feature columns are named by strings; these are not: "
                            f"{unnamed[:5]!r}. Rename them (df.columns = df.columns.astype(str)), "
                            "or choose the features with columns=[...].")
    else:
        feature_names = _names(columns, "columns")
        if not feature_names:
            raise ValueError("columns is empty; name at least one feature column.")
        _check_present(df, feature_names, "columns")
        clash = [c for c in feature_names if c in by_names]
        if clash:
            raise ValueError(f"column(s) {clash} are both set ids (by) and features (columns).")
    if len(df) == 0:
        raise ValueError("frame is empty (0 rows); there are no sets to build.")
    schema = df.schema
    bad = {c: str(schema[c]) for c in feature_names
           if not (schema[c].is_numeric() or schema[c] == nw.Boolean)}
    if bad:
        raise TypeError(f"feature column(s) are not numeric: {bad}. Convert them, or choose the "
                        "features with columns=[...].")

    id_columns, codes, perm, counts = _group_rows(df, by_names, order_names)
    # nullable columns of other kinds than floats as floats, so that a missing value is a NaN
    # (and gets the message below naming the set, column and row)
    X = df.select([nw.col(c).cast(nw.Float64) if schema[c] == nw.Boolean else nw.col(c)
                   for c in feature_names]).to_numpy()
    # the documented rule, by the schema (back ends differ: polars casts float32 + bool to float32,
    # pandas to float64): float32 when every feature column is float32, else float64
    all32 = all(schema[c] == nw.Float32 for c in feature_names)
    X = X.astype(np.float32 if all32 else np.float64, copy=False)  # ints, bools, decimals
    if not _is_identity(perm):
        X = np.take(X, perm, axis=0)  # np.take: several times faster than X[perm] on rows
    else:
        # frames give column-major arrays; sets are row-major, and never views of the frame's
        # own memory (a later edit of the frame would change them)
        X = np.array(X, order="C", copy=not X.flags.owndata or not X.flags.c_contiguous)
    if not (np.isfinite(X.min()) and np.isfinite(X.max())):
        rows, cols = np.nonzero(~np.isfinite(X))
        r, c = rows[0], cols[0]
        ids = _format_ids(id_columns, not isinstance(by, str))
        kind = "NaN" if np.isnan(X[r, c]) else "infinity"
        # a pandas row is named by its index label (the same in a partition of a dask frame as
        # in the whole frame); other frames by position
        index = getattr(frame, "index", None)
        if isinstance(index, _pd_index_types()):
            label = index[perm[r]]
            where = f"index {label.item() if isinstance(label, np.generic) else label!r}"
        else:
            where = f"row {perm[r]}"
        raise ValueError(
            f"frame: set {ids[codes[perm[r]]]!r} has {kind} in column {feature_names[c]!r} "
            f"({where} of the frame; {len(np.unique(rows))} row(s) in all have NaN or infinity); "
            "skset needs finite values (drop or impute them first).")
    ends = np.cumsum(counts)
    sets = [X[a:b] for a, b in zip((ends - counts).tolist(), ends.tolist())]
    return sets, _format_ids(id_columns, not isinstance(by, str))


def _pd_index_types() -> tuple:
    """pandas' ``Index`` class, if pandas is imported (a pandas frame has one)."""
    import sys

    pd = sys.modules.get("pandas")
    return (pd.Index,) if pd is not None else ()


def _check_values(values) -> list[np.ndarray]:
    if isinstance(values, np.ndarray) and values.dtype != object:
        if values.ndim != 3:
            raise ValueError(f"values is an array of shape {values.shape}; give one array per set "
                             "(a list of (n_i,) or (n_i, k) arrays, or a 3-D array (n_sets, n, k)).")
        return list(values)
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise TypeError(f"values must be a list of arrays, one per set, got {type(values).__name__}.")
    out = [np.asarray(v) for v in values]
    ndims = {v.ndim for v in out}
    if not ndims <= {1, 2} or len(ndims) > 1:
        raise ValueError(
            "values: every set's values must be 1-D (n_i,) or every one 2-D (n_i, k), with the "
            f"elements on the first axis; got arrays with {sorted(ndims)} dimensions. (A transport "
            "plan (n_references, n_i, n_supports) gives rows with p.transpose(1, 0, 2).reshape("
            "p.shape[1], -1), or p[0] for one reference.)")
    if ndims == {2} and len({v.shape[1] for v in out}) > 1:
        raise ValueError("values: the sets' values have different numbers of columns "
                         f"{sorted({v.shape[1] for v in out})}.")
    return out


def _check_ids(ids, n_by: int) -> list:
    """The ids as scalars (one ``by`` column; 1-tuples unwrapped) or tuples of ``n_by`` values."""
    keys = list(ids)
    if n_by == 1:
        return [k[0] if isinstance(k, tuple) and len(k) == 1 else k for k in keys]
    bad = [k for k in keys if not (isinstance(k, tuple) and len(k) == n_by)]
    if bad:
        raise ValueError(f"by names {n_by} columns, so every id must be a tuple of {n_by} values; "
                         f"got {bad[0]!r}.")
    return keys


def _value_names(columns, k: int) -> list[str]:
    if columns is None:
        return [f"x{j}" for j in range(k)]
    if isinstance(columns, str):
        return [columns] if k == 1 else [f"{columns}{j}" for j in range(k)]
    names = _names(columns, "columns")
    if len(names) != k:
        raise ValueError(f"columns names {len(names)} column(s) but the values have {k}.")
    return names


def _backend(backend):
    if backend is not None:
        return backend
    for name in ("pandas", "polars"):
        try:
            __import__(name)
        except ImportError:
            continue
        return name
    raise ImportError("frame_from_sets needs pandas or polars (pip install pandas), or a backend=.")


def frame_from_sets(
    values,
    ids: Sequence,
    by: str | Sequence[str] = "set_id",
    columns: str | Sequence[str] | None = None,
    *,
    frame: Any = None,
    order_by: str | Sequence[str] | None = None,
    backend: Any = None,
):
    """Per-element values of sets back into a data frame: the inverse of :func:`sets_from_frame`.

    ``values`` holds one array per set with one row per element: per-element features
    (``NystromFeatures().transform(sets)``), cluster labels (``ABCClusterer().predict(sets)``),
    rows of a transport plan. Without ``frame`` they become a new long frame, one row per element;
    with ``frame`` (the table the sets came from) they become new columns of it, each row getting
    the values of its own element. No Python loop runs over rows.

    Parameters
    ----------
    values : list of ndarray of shape (n_i,) or (n_i, k), or ndarray of shape (n_sets, n, k)
        The values of each set's elements, in the sets' element order.
    ids : sequence
        One id per set, aligned with ``values`` (the ``ids`` returned by :func:`sets_from_frame`,
        or a subset of them in any order).
    by : str or list of str, default="set_id"
        The id column(s). Without ``frame``: their names in the new frame (a list when ids are
        tuples). With ``frame``: the column(s) of ``frame`` the sets were grouped by.
    columns : str or list of str, optional
        Names of the value columns: a list of ``k`` names, or a str (the name of the one column, or
        a prefix: ``"z"`` gives ``z0, z1, ...``). Default ``x0, x1, ...``.
    frame : data frame, optional
        The frame the sets were built from. The values are added to it as new columns, aligned
        with its rows (row order and other columns unchanged); rows of sets not in ``ids`` get
        missing values (null; NaN in pandas). The sizes must match: set ``i`` must have as many
        values as ``frame`` has rows with id ``ids[i]`` (k-mer outputs, ``window > 1``, have
        ``window - 1`` fewer; dilated k-mers ``span - 1`` fewer, at least one).
    order_by : str or list of str, optional
        With ``frame``: the same ``order_by`` as given to :func:`sets_from_frame`, so that the
        ``j``-th value of a set goes to its ``j``-th row in that order.
    backend : {"pandas", "polars"}, module, or None
        Without ``frame``: the library of the new frame; default pandas when installed, else
        polars. With ``frame``: ignored, the result has the type of ``frame``.

    Returns
    -------
    pandas.DataFrame, polars.DataFrame, ...
        Without ``frame``: the id column(s) then the value columns, one row per element, sets in
        the order of ``ids`` and elements in their order. With ``frame``: ``frame`` with the value
        columns appended.

    See Also
    --------
    sets_from_frame : the long frame to sets.

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> from skset import frame_from_sets, sets_from_frame
    >>> cells = pd.DataFrame({"sample": ["b", "a", "b"], "CD4": [1.0, 2.0, 3.0]})
    >>> sets, ids = sets_from_frame(cells, by="sample")
    >>> labels = [np.array([0, 1]), np.array([0])]          # e.g. one cluster label per cell
    >>> frame_from_sets(labels, ids, by="sample", columns="cluster")
      sample  cluster
    0      b        0
    1      b        1
    2      a        0
    >>> frame_from_sets(labels, ids, by="sample", columns="cluster", frame=cells)
      sample  CD4  cluster
    0      b  1.0        0
    1      a  2.0        0
    2      b  3.0        1
    """
    vals = _check_values(values)
    if ids is None or isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
        raise TypeError(f"ids must be a sequence of one id per set (the ids returned by "
                        f"sets_from_frame), got {type(ids).__name__}.")
    ids = list(ids)
    if len(ids) != len(vals):
        raise ValueError(f"values holds {len(vals)} set(s) but ids {len(ids)}; give one id per set.")
    if not vals:
        raise ValueError("values holds no sets.")
    k = 1 if vals[0].ndim == 1 else vals[0].shape[1]
    names = _value_names(columns, k)
    by_names = _names(by, "by", allow_empty=False)
    lengths = np.fromiter((len(v) for v in vals), dtype=np.int64, count=len(vals))
    flat = np.concatenate([v.reshape(len(v), k) for v in vals])

    keys = _check_ids(ids, len(by_names))
    if frame is None:
        clash = set(by_names) & set(names)
        if clash:
            raise ValueError(f"column name(s) {sorted(clash)} used for both ids and values.")
        impl = _backend(backend)
        id_cols = [keys] if len(by_names) == 1 else [list(c) for c in zip(*keys)]
        which = np.repeat(np.arange(len(vals)), lengths)
        out = nw.from_numpy(flat, schema=names, backend=impl)
        for name, col in zip(by_names, id_cols):
            try:  # the library infers the ids' type (int, str, datetime, ...)
                ids_series = nw.new_series(name, col, backend=impl)
            except Exception:  # mixed types: keep the Python objects
                arr = np.empty(len(col), dtype=object)
                arr[:] = col
                ids_series = nw.new_series(name, arr, backend=impl)
            out = out.with_columns(ids_series[which])
        return out.select([*by_names, *names]).to_native()

    df = _to_frame(frame)
    order_names = _names(order_by, "order_by", allow_none=True) or []
    _check_present(df, by_names, "by")
    _check_present(df, order_names, "order_by")
    clash = [n for n in names if n in df.columns]
    if clash:
        raise ValueError(f"frame already has column(s) {clash}; choose other names with columns=.")
    id_columns, codes, perm, counts = _group_rows(df, by_names, order_names)
    frame_ids = _format_ids(id_columns, len(by_names) > 1)
    code_of = {key: i for i, key in enumerate(frame_ids)}
    set_codes = np.empty(len(keys), dtype=np.int64)
    for i, key in enumerate(keys):
        c = code_of.get(key)
        if c is None:
            raise ValueError(f"id {key!r} (set {i}) is not a set of frame grouped by {by_names}.")
        set_codes[i] = c
    if len(np.unique(set_codes)) != len(set_codes):
        raise ValueError("ids holds an id twice.")
    wrong = np.flatnonzero(counts[set_codes] != lengths)
    if len(wrong):
        i = wrong[0]
        raise ValueError(
            f"set {keys[i]!r} has {lengths[i]} value row(s) but {counts[set_codes[i]]} row(s) in "
            "frame; values must have one row per element (k-mer features, window > 1, have "
            "window - 1 fewer rows than the set; dilated k-mers span - 1 fewer, at least one).")
    # position of each row within its set, then where its values are in `flat`
    starts_frame = np.concatenate([[0], np.cumsum(counts)[:-1]])
    position = np.empty(len(df), dtype=np.int64)
    position[perm] = np.arange(len(df)) - starts_frame[codes[perm]]
    slot = np.full(len(counts), -1, dtype=np.int64)
    slot[set_codes] = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    start = slot[codes]
    covered = start >= 0
    src = np.where(covered, start + position, 0)
    impl = df.implementation
    columns_ = np.ascontiguousarray(flat.T)  # one contiguous array per new column
    if not _is_identity(src):
        columns_ = [np.take(c, src) for c in columns_]
    new = [nw.new_series(name, c, backend=impl) for c, name in zip(columns_, names)]
    if covered.all():
        out = df.with_columns(new)
    else:
        mask = nw.new_series(_fresh(df, "__skset_covered"), covered, backend=impl)
        out = df.with_columns(nw.when(mask).then(s).alias(s.name) for s in new)
    return out.to_native()
