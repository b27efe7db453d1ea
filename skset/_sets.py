"""The set data model shared by every skset estimator.

A *collection of sets* is one of

* a Python list (or tuple) of float arrays of shape ``(n_i, d)``: set ``i`` has ``n_i`` elements,
  each a vector of ``d`` features; sizes differ freely, ``d`` does not;
* a 1-D ``object`` ndarray of such arrays (what slicing a list through numpy gives);
* a 3-D array ``(n_sets, n, d)`` when all sets have the same size.

The form is decided by structure, never by ``np.array(list_of_sets)`` (which raises on ragged lists
and silently turns equal-size lists into a 3-D array).

Estimators validate with :func:`check_sets`, then :func:`pack` moves sets to torch (padding and a
boolean mask, ``True`` on real elements) in the batches of :func:`length_batches` (sets sorted by
length: little padding; a cap on the padded elements of a batch: bounded memory).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ._finite import plainly_finite_sets
from ._frames import frame_numbers, pandas_missing

__all__ = ["SetCollection", "check_sets", "check_set_labels", "check_finite_output", "max_abs_value",
           "pack", "unpack", "length_batches", "iter_packed", "kmer_windows", "kmer_level_shape",
           "code_kmers", "kmer_dilation", "kmer_index", "kmer_span", "kmer_width",
           "missing_labels", "pack_weights", "to_numpy"]

_FLOAT_DTYPES = (np.float64, np.float32)


@dataclass
class SetCollection:
    """Validated sets: ``sets`` is a list of 2-D float arrays, ``form`` the input's form.

    ``form`` is ``"list"``, ``"object"``, ``"3d"`` or ``"2d"`` (a single pool of elements, only
    when the caller allows it); :meth:`wrap` gives per-element outputs back in the same form.
    """

    sets: list[np.ndarray]
    form: str

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter((s.shape[0] for s in self.sets), dtype=np.int64, count=len(self.sets))

    @property
    def n_features(self) -> int:
        return self.sets[0].shape[1]

    def __len__(self) -> int:
        return len(self.sets)

    def wrap(self, outputs: list[np.ndarray]):
        """Return per-set ``outputs`` in the form the input came in."""
        if self.form == "2d":
            return outputs[0]
        if self.form == "3d":
            return np.stack(outputs) if outputs else np.empty((0, 0, 0))
        if self.form == "object":
            out = np.empty(len(outputs), dtype=object)
            out[:] = outputs
            return out
        return list(outputs)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """``t`` as a numpy array on the CPU (bfloat16 and torch's other small floats as float32)."""
    t = t.detach().cpu()
    if t.is_floating_point() and t.dtype not in (torch.float16, torch.float32, torch.float64):
        t = t.float()
    return t.numpy()


def _describe(x) -> str:
    return f"an array of shape {x.shape}" if isinstance(x, np.ndarray) else f"a {type(x).__name__}"


def _as_float_array(x, where: str, dtype) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = to_numpy(x)
    if hasattr(x, "toarray") and not isinstance(x, np.ndarray):
        raise TypeError(f"{where} is a sparse matrix; skset needs dense arrays (call .toarray()).")
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError) as exc:
        raise TypeError(f"{where} could not be read as a numeric array: {exc}") from None
    if arr.dtype == object:
        try:  # pandas' missing values (NA, NaT) read as NaN: refused below as NaN, by name
            arr = np.where(pandas_missing(arr).astype(bool), np.nan, arr).astype(np.float64)
        except (ValueError, TypeError):
            raise TypeError(f"{where} holds non-numeric values ({_describe(x)}).") from None
    if arr.dtype.kind in "USV":
        raise TypeError(f"{where} holds strings, not numbers.")
    if arr.dtype.kind == "c":
        raise TypeError(f"{where} holds complex numbers; skset works on real features.")
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{where} has unsupported dtype {arr.dtype}.")
    if dtype is not None:
        target = np.dtype(dtype)
    elif arr.dtype in _FLOAT_DTYPES:
        target = arr.dtype
    else:
        target = np.dtype(np.float64)
    return arr.astype(target, copy=False)


#: Largest magnitude accepted when computing in a dtype: about sqrt(finfo.max) / 1e4, so that sums
#: of squares and inner products over thousands of features and elements stay finite.
MAX_ABS_VALUE = {"float32": 1e15, "float64": 1e150}


def dtype_name(dtype) -> str:
    """``"float32"``/``"float64"`` for a torch dtype, numpy dtype or type, or dtype name."""
    if isinstance(dtype, torch.dtype):
        return str(dtype).replace("torch.", "")
    try:
        return np.dtype(dtype).name
    except TypeError:
        return str(dtype)


def max_abs_value(compute_dtype) -> float:
    """The largest input magnitude the estimators accept when computing in ``compute_dtype``."""
    return MAX_ABS_VALUE.get(dtype_name(compute_dtype), MAX_ABS_VALUE["float32"])


def _check_one(arr: np.ndarray, where: str, min_elements: int,
               limit: float | None = None, compute_dtype=None) -> np.ndarray:
    if arr.ndim == 1:
        raise ValueError(
            f"{where} is 1-D with shape {arr.shape}; each set must be a 2-D array (n_elements, "
            "n_features). Use x.reshape(-1, 1) for a set of scalars or x.reshape(1, -1) for a set "
            "holding one vector.")
    if arr.ndim != 2:
        raise ValueError(f"{where} has {arr.ndim} dimensions; expected a 2-D array (n_elements, "
                         "n_features).")
    if arr.shape[1] == 0:
        raise ValueError(f"{where} has 0 features.")
    if arr.shape[0] < min_elements:
        if arr.shape[0] == 0:
            raise ValueError(f"{where} is empty (0 elements); every set needs at least "
                             f"{min_elements} element(s).")
        raise ValueError(f"{where} has {arr.shape[0]} element(s); at least {min_elements} are "
                         "needed.")
    # min and max read the data once without a temporary (a memmap stays cheap) and carry NaN
    lo, hi = arr.min(), arr.max()
    if not (np.isfinite(lo) and np.isfinite(hi)):
        bad = "NaN" if np.isnan(arr).any() else "infinity"
        raise ValueError(f"{where} contains {bad}; skset needs finite values (impute or drop "
                         "them first).")
    if limit is not None and max(-float(lo), float(hi)) > limit:
        dt = dtype_name(compute_dtype)
        raise ValueError(
            f"{where} holds values as large as {max(-float(lo), float(hi)):.3g} in magnitude, too "
            f"large for {dt} computations (the limit is {limit:.0e}); rescale the features (e.g. "
            "standardise them)" + (" or use dtype='float64'." if dt != "float64" else ".")
        )
    return arr


def check_sets(
    X,
    *,
    name: str = "X",
    dtype=None,
    min_elements: int = 1,
    n_features: int | None = None,
    allow_pool: bool = False,
    min_sets: int = 1,
    compute_dtype=None,
) -> SetCollection:
    """Validate a collection of sets.

    Parameters
    ----------
    X : list of array-like of shape (n_i, d), 1-D object ndarray of those, or ndarray (n_sets, n, d)
        The sets. With ``allow_pool=True`` a 2-D array ``(N, d)`` is accepted too and read as a
        single pool of elements (``form == "2d"``).
    name : str
        How the collection is called in error messages.
    dtype : numpy dtype or None
        Convert every set to this dtype; ``None`` keeps float32/float64 and turns other numeric
        dtypes into float64.
    min_elements : int
        Fewest elements a set may have.
    n_features : int or None
        The number of features the sets must have (e.g. the one seen in ``fit``).
    allow_pool : bool
        Accept a 2-D array as one pool of elements.
    min_sets : int
        Fewest sets the collection may hold.
    compute_dtype : str, numpy or torch dtype, or None
        The dtype the estimator computes in: values larger in magnitude than
        :func:`max_abs_value` of it (1e15 for float32, 1e150 for float64) are refused with a
        ``ValueError``, as they would overflow to infinity or NaN inside. ``None``: no limit.

    Returns
    -------
    SetCollection
        The sets as a list of 2-D float arrays (views of the input where no conversion was needed:
        never modify them in place) and the input's form.

    Raises
    ------
    TypeError
        For inputs that are not numeric arrays or collections of them.
    ValueError
        For empty sets, NaN or infinity, wrong dimensions, or sets whose number of features
        differs; the message names the offending set.
    """
    if isinstance(X, (str, bytes)) or X is None or np.isscalar(X):
        raise TypeError(f"{name} must be a collection of sets (a list of 2-D arrays or a 3-D "
                        f"array), got {_describe(X)}.")
    if hasattr(X, "toarray") and not isinstance(X, np.ndarray):
        raise TypeError(f"{name} is a sparse matrix; skset needs dense arrays.")
    if hasattr(X, "to_numpy") and not isinstance(X, np.ndarray):
        X = frame_numbers(X)  # pandas DataFrame: a single pool of elements
    if isinstance(X, torch.Tensor):
        X = to_numpy(X)

    if isinstance(X, np.ndarray) and X.dtype != object:
        if X.ndim == 3:
            arr = _as_float_array(X, name, dtype)
            form, sets = "3d", list(arr)
        elif X.ndim == 2:
            if not allow_pool:
                raise ValueError(
                    f"{name} is a 2-D array of shape {X.shape}; expected a collection of sets: a "
                    "list of (n_i, n_features) arrays, or a 3-D array (n_sets, n, n_features) "
                    "when all sets have the same size (series of one length, one per row: "
                    "X[:, :, None]).")
            arr = _as_float_array(X, name, dtype)
            form, sets = "2d", [arr]
        elif X.ndim == 1:  # scikit-learn's checks look for "Reshape your data" where a pool fits
            pool = ", or a pool: Reshape your data to (n_elements, n_features)" if allow_pool else ""
            raise ValueError(f"{name} is a 1-D array of shape {X.shape}; expected a collection of "
                             f"sets (a list of 2-D arrays or a 3-D array){pool}.")
        else:
            raise ValueError(f"{name} has {X.ndim} dimensions (shape {X.shape}); expected a "
                             "collection of sets: a list of 2-D arrays or a 3-D array.")
    elif isinstance(X, np.ndarray):  # object array
        if X.ndim != 1:
            raise ValueError(f"{name} is an object array of shape {X.shape}; expected a 1-D "
                             "object array holding one 2-D array per set.")
        form, sets = "object", list(X)
    elif isinstance(X, Sequence):
        form, sets = "list", list(X)
    elif hasattr(X, "__len__") and hasattr(X, "__getitem__") and not isinstance(X, dict):
        # a lazily loading collection (set i read on demand): index it, do not iterate it
        form, sets = "list", [X[i] for i in range(len(X))]
    else:
        hint = (" For a stream of sets (a generator or iterator), use "
                "skset.utils.iter_transform(estimator, stream, chunk_size=...) to transform it "
                "chunk by chunk, or list(stream) if it fits in memory."
                if hasattr(X, "__iter__") or hasattr(X, "__next__") else "")
        raise TypeError(f"{name} must be a list of 2-D arrays or a 3-D array, got "
                        f"{_describe(X)}.{hint}")

    if len(sets) < min_sets:
        raise ValueError(f"{name} holds {len(sets)} set(s); at least {min_sets} needed.")

    limit = None if compute_dtype is None else max_abs_value(compute_dtype)
    out = []
    d0 = n_features
    fast_dtypes = _FLOAT_DTYPES if dtype is None else (np.dtype(dtype),)
    finite = plainly_finite_sets(sets, limit, fast_dtypes)
    for i, s in enumerate(sets):
        if (finite[i] and s.shape[0] >= min_elements and s.shape[1] > 0
                and (d0 is None or s.shape[1] == d0)):
            # the common case, checked in one BLAS pass (many small sets: the per-set checks
            # were a sixth of OTKEmbedding.transform on 512 x 100 x 128)
            d0 = s.shape[1]
            out.append(s)
            continue
        where = f"{name}: the pool of elements" if form == "2d" else f"{name}: set {i}"
        if form in ("list", "object") and (s is None or np.isscalar(s)):
            what, hint = ("None", "") if s is None else (
                "a scalar", " A flat list of numbers is not a collection of sets.")
            raise ValueError(f"{where} is {what}; expected a 2-D array (n_elements, n_features).{hint}")
        arr = _check_one(_as_float_array(s, where, dtype), where, min_elements, limit,
                         compute_dtype)
        if d0 is None:
            d0 = arr.shape[1]
        elif arr.shape[1] != d0:
            if n_features is not None:
                raise ValueError(f"{where} has {arr.shape[1]} features, but the estimator was "
                                 f"fitted on {n_features} features.")
            raise ValueError(f"{where} has {arr.shape[1]} features but set 0 has {d0}; all sets "
                             "must share one number of features.")
        out.append(arr)
    dtypes = {a.dtype for a in out}
    if form in ("list", "object") and len(dtypes) > 1:
        # one dtype for the whole collection: the widest float among the sets
        dt = np.result_type(*dtypes)
        out = [a.astype(dt, copy=False) for a in out]
    return SetCollection(out, form)


def check_set_labels(y, n_sets: int, *, name="y", multi_output=False, pool=False) -> np.ndarray:
    """Check that ``y`` holds one target per set (or one row per set when ``multi_output``;
    ``pool``: ``X`` is one 2-D pool of ``n_sets`` elements, one target per row)."""
    if y is None:
        raise ValueError(f"{name} is None; this estimator needs one target per set.")
    if isinstance(y, torch.Tensor) or hasattr(y, "toarray"):  # a scipy.sparse y: dense rows
        y = to_numpy(y) if isinstance(y, torch.Tensor) else y.toarray()
    if isinstance(y, (list, tuple)) and len({isinstance(v, (str, bytes)) for v in y}) > 1:
        _check_object_labels(np.asarray(y, dtype=object), name)  # numpy makes them all strings
    try:
        y = np.asarray(y)
    except ValueError:  # ragged
        raise ValueError(f"{name} is ragged (entries of different lengths); expected one target "
                         f"per set ({n_sets} sets), or one row of targets per set.") from None
    if y.ndim == 0:
        raise ValueError(f"{name} is a scalar; expected one target per set ({n_sets} sets).")
    if y.dtype.kind == "c":
        raise TypeError(f"{name} holds complex numbers; targets are real numbers or labels.")
    if y.ndim == 2 and y.shape[1] == 1 and not multi_output:  # (the classifiers warn first)
        y = y[:, 0]
    if y.ndim > (2 if multi_output else 1):
        raise ValueError(f"{name} has shape {y.shape}; expected ({n_sets},)"
                         + (f" or ({n_sets}, n_outputs)" if multi_output else "") + ".")
    if y.ndim == 2 and y.shape[1] == 0:
        raise ValueError(f"{name} has shape {y.shape}: no target columns.")
    if y.shape[0] != n_sets:
        held = f"{n_sets} rows (a 2-D X is one pool of elements)" if pool else f"{n_sets} sets"
        raise ValueError(f"{name} has {y.shape[0]} entries but X holds {held}; give one target "
                         f"per {'row' if pool else 'set'}.")
    if y.dtype.kind in "fc" and not np.isfinite(y).all():
        raise ValueError(f"{name} contains NaN or infinity.")
    if y.dtype == object:
        _check_object_labels(y, name)
    return y


def check_choice_labels(y, sets, *, pool: bool = False):
    """``y`` as a transformer that chooses from labels reads it (``NystromFeatures``' map and
    k-mer width, ``OTKEmbedding``'s positions): ``None``; per-element labels (one 1-D array per
    set, of its length: an instance of :class:`skset.cluster.ABCClusterer` after the step in a
    ``Pipeline``), accepted as they are (they choose nothing); otherwise checked by
    :func:`check_set_labels` (one label, or one row of outputs, per set, or per row of a 2-D pool
    of elements, ``pool=True``, whose one set is ``sets[0]``); a column ``(n, 1)`` is one output."""
    if y is None:
        return None
    if not pool and isinstance(y, (list, tuple)) and len(y) == len(sets) and all(
            np.ndim(t) == 1 and len(t) == len(s) for t, s in zip(y, sets)) and any(
            len(s) != 1 for s in sets):
        return y
    y = check_set_labels(y, len(sets[0]) if pool else len(sets), multi_output=True, pool=pool)
    return y[:, 0] if getattr(y, "ndim", 1) == 2 and y.shape[1] == 1 else y


def missing_labels(y: np.ndarray) -> np.ndarray:
    """Whether each label of ``y`` is missing: NaN in a float array; None, NaN or pandas' NA
    (which refuses ``bool()``) in an object array, among strings too."""
    if y.dtype != object:
        return np.isnan(y) if y.dtype.kind in "fc" else np.zeros(y.shape, dtype=bool)
    return np.array([v is None or type(v).__name__ == "NAType"
                     or (isinstance(v, (float, np.floating)) and v != v) for v in y.ravel().tolist()],
                    dtype=bool).reshape(y.shape)


def _check_object_labels(y: np.ndarray, name: str) -> None:
    """Labels of an object array: a ``TypeError`` when strings mix with numbers (they cannot be
    sorted into classes), a ``ValueError`` for a missing (None, NaN) or infinite one."""
    flat = y.ravel().tolist()
    if missing_labels(y).any():
        raise ValueError(f"{name} contains a missing label (None, NaN or NA); give every set a label.")
    kinds = {"str" if isinstance(v, (str, bytes, np.str_)) else "number"
             if isinstance(v, (int, float, np.number, bool, np.bool_)) else type(v).__name__
             for v in flat}
    if len(kinds) > 1 or not kinds <= {"str", "number"}:
        raise TypeError(f"{name} {'mixes label types' if len(kinds) > 1 else 'holds labels of type'} "
                        f"{sorted(kinds)}; every label must be of one kind (all strings, or all numbers).")
    if "number" in kinds and not np.isfinite(np.asarray(flat, dtype=float)).all():
        raise ValueError(f"{name} contains NaN or infinity.")


def pack(sets: Sequence[np.ndarray], *, device: torch.device | str = "cpu",
         dtype: torch.dtype = torch.float32, n_max: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad sets into a ``(B, n_max, d)`` tensor and a boolean ``(B, n_max)`` mask.

    The mask is ``True`` on real elements. Padding is zeros; the engine never lets padded positions
    receive mass, attention or statistics, so their value does not matter.
    """
    lengths = np.fromiter((s.shape[0] for s in sets), dtype=np.int64, count=len(sets))
    B = len(sets)
    d = sets[0].shape[1]
    n = int(lengths.max()) if n_max is None else int(n_max)
    buf = np.empty((B, n, d), dtype=np.float64 if dtype == torch.float64 else np.float32)
    # one contiguous block copy per set: 2x faster than concatenating and scattering with a
    # fancy index (12-14 ms vs 6 ms for 512 x 100 x 128), and 3x faster than pad_sequence; only
    # the padding is zeroed (not the whole buffer first: one pass less over memory)
    for i, s in enumerate(sets):
        m = s.shape[0]
        buf[i, :m] = s
        if m < n:
            buf[i, m:] = 0
    mask = np.arange(n)[None, :] < lengths[:, None]
    X = torch.from_numpy(buf).to(device=device, dtype=dtype)
    M = torch.from_numpy(mask).to(device=device)
    return X, M


def unpack(X: torch.Tensor, mask: torch.Tensor) -> list[np.ndarray]:
    """Inverse of :func:`pack`: the real rows of each set, as numpy arrays."""
    lengths = mask.sum(1).cpu().numpy()
    flat = X[mask].detach().cpu().numpy()
    return np.split(flat, np.cumsum(lengths)[:-1])


def length_batches(
    lengths: np.ndarray,
    *,
    max_elements: int | None = 131072,
    max_sets: int | None = None,
    sort: bool = True,
    padding_tolerance: float | None = None,
) -> list[np.ndarray]:
    """Cut set indices into batches of similar lengths under a budget of padded elements.

    Sets are sorted by length (stable, so ties keep their order); a batch grows while
    ``len(batch) * longest_in_batch <= max_elements`` and ``len(batch) <= max_sets``. A set longer
    than the budget gets a batch of its own. With ``sort=False`` the order is kept (the naive
    scheme the benchmarks compare against).

    With ``padding_tolerance`` a batch also stops growing once its padded size would exceed
    ``(1 + padding_tolerance)`` times its real elements, unless it is still small (under
    ``max_elements / 16`` padded elements, where per-batch overhead dominates). Filling batches to
    the budget alone pads the short sets of a wide length range to the longest of a big first batch;
    inference paths use 0.1 (training keeps ``batch_size`` batches and passes ``None``).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(lengths, kind="stable") if sort else np.arange(len(lengths))
    if max_elements is None and max_sets is None:
        return [order] if len(order) else []
    batches = []
    start = 0
    n = len(order)
    min_fill = (max_elements if max_elements is not None else 1 << 20) // 16
    sorted_lengths = lengths[order].tolist()  # Python ints: the greedy loop below is 5x faster
    while start < n:
        stop = start + 1
        longest = sorted_lengths[start]
        real = longest
        while stop < n:
            nxt = sorted_lengths[stop]
            cand = max(longest, nxt)
            size = stop - start + 1
            if max_sets is not None and size > max_sets:
                break
            if max_elements is not None and size * cand > max_elements:
                break
            if (padding_tolerance is not None and size * cand > min_fill
                    and size * cand > (1.0 + padding_tolerance) * (real + nxt)):
                break
            longest = cand
            real += nxt
            stop += 1
        batches.append(order[start:stop])
        start = stop
    return batches


def iter_packed(
    sets: Sequence[np.ndarray],
    *,
    device="cpu",
    dtype=torch.float32,
    max_elements: int | None = 131072,
    max_sets: int | None = None,
    sort: bool = True,
    padding_tolerance: float | None = 0.1,
    cost: np.ndarray | None = None,
) -> Iterator[tuple[np.ndarray, torch.Tensor, torch.Tensor]]:
    """Yield ``(indices, X, mask)`` for each length batch of ``sets`` (see :func:`length_batches`).

    ``cost``: what each set counts against ``max_elements`` (default: its length; a model whose
    memory grows with the square of the length, ABC, passes the squared lengths).
    """
    if cost is None:
        cost = np.fromiter((s.shape[0] for s in sets), dtype=np.int64, count=len(sets))
    for idx in length_batches(cost, max_elements=max_elements, max_sets=max_sets, sort=sort,
                              padding_tolerance=padding_tolerance if sort else None):
        X, M = pack([sets[i] for i in idx], device=device, dtype=dtype)
        yield idx, X, M


def pack_weights(
    weights: Sequence[np.ndarray],
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    n_max: int | None = None,
) -> torch.Tensor:
    """Pad per-element weights (one 1-D array per set) into a ``(B, n_max)`` tensor, 0 on pads,
    aligned with :func:`pack` of the same sets."""
    W, _ = pack([np.asarray(w).reshape(-1, 1) for w in weights], device=device, dtype=dtype,
                n_max=n_max)
    return W[..., 0]


def check_kmer_lengths(lengths: np.ndarray, window: int, *, name: str = "X",
                       dilation: int = 1) -> None:
    """A ``ValueError`` naming the first training set shorter than an explicit contiguous k-mer
    ``window`` (a fit refuses a width its sets cannot hold; with ``dilation > 1`` a set of any
    size has a k-mer, and a fitted model reads a set of any size: :func:`kmer_index`)."""
    if int(dilation) > 1:
        return
    short = np.flatnonzero(np.asarray(lengths) < window)
    if len(short):
        i = int(short[0])
        raise ValueError(f"{name}: set {i} has {lengths[i]} elements, fewer than the k-mer window "
                         f"({window}); use a smaller window or drop short sets.")


def kmer_span(window: int, dilation: int = 1) -> int:
    """The steps a k-mer of ``window`` elements ``dilation`` apart covers."""
    return (int(window) - 1) * int(dilation) + 1


def kmer_index(lengths: np.ndarray, window: int, dilation: int = 1):
    """``(index, n_out)``: the rows of every k-mer of sets of ``lengths`` elements stacked one
    after the other (``index (sum(n_out), window)`` into the stacked elements) and the number of
    k-mers of each set.

    k-mer ``i`` of a set holds its elements ``i, i + dilation, ..., i + (window - 1) * dilation``;
    a set of ``n`` elements has ``max(n - span + 1, 1)`` of them (``span``: :func:`kmer_span`):
    a set shorter than the span has one, its last element repeated where the set ends (a fit
    refuses training sets shorter than an explicit contiguous window,
    :func:`check_kmer_lengths`; a fitted model reads sets of any size).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    n_out = np.maximum(lengths - kmer_span(window, dilation) + 1, 1)
    offsets = np.cumsum(lengths) - lengths
    local = np.arange(n_out.sum()) - np.repeat(np.cumsum(n_out) - n_out, n_out)
    steps = local[:, None] + int(dilation) * np.arange(int(window))[None, :]
    last = np.repeat(lengths - 1, n_out)[:, None]
    return np.repeat(offsets, n_out)[:, None] + np.minimum(steps, last), n_out


def kmer_windows(sets: Sequence[np.ndarray], window: int, *,
                 dilation: int = 1) -> list[np.ndarray]:
    """Concatenate ``window`` elements of each (ordered) set, ``dilation`` apart.

    A set of ``n`` elements of ``d`` features becomes ``n - window + 1`` elements of
    ``window * d`` features, element ``i`` being ``[x_i, x_{i+1}, ..., x_{i+window-1}]``
    (``dilation=1``); with ``dilation`` ``[x_i, x_{i+dilation}, ...]``; a set shorter than a
    k-mer has one, its last element repeated (:func:`kmer_index`). Done in one gather over all
    sets.
    """
    window = int(window)
    if window == 1:
        return list(sets)
    lengths = np.fromiter((s.shape[0] for s in sets), dtype=np.int64, count=len(sets))
    flat = np.concatenate(sets, axis=0)
    index, n_out = kmer_index(lengths, window, dilation)
    gathered = flat[index].reshape(len(index), -1)  # (N_out, window * d)
    return np.split(gathered, np.cumsum(n_out)[:-1])


def kmer_level_shape(sets: Sequence[np.ndarray], window: int, *, dilation: int = 1,
                     split: bool = True):
    """The k-mers of :func:`kmer_windows` coded as *level + shape*: per k-mer ``w`` (``window``
    steps x ``d`` channels), its deviations from its own mean ``w - mean_t(w)`` (``window * d``
    values, in :func:`kmer_windows`' order) followed by that mean (``d`` values).

    A linear, invertible re-coding (the k-mer is the shape plus the level, repeated). Why it
    matters: the steps of a k-mer of a smooth series are strongly correlated, so the distance
    between two plain k-mers is dominated by the difference of their levels, counted ``window``
    times; coded, the level is one coordinate per channel, and after per-feature
    standardisation shapes that sit at different heights are compared as shapes.
    :func:`skset.nn.kmer_level_shape` is the same coding on padded tensors.

    Coded and returned in float64 whatever the sets' dtype, as the standardisation that follows
    computes: a float32 set was coded in float32 alone and in float64 beside float64 sets (a
    call's sets share the widest dtype), and the level of a k-mer far from zero, rounded to
    float32, lost what standardisation then magnified (data at 1e4: 3e-2 apart, relative).

    One array per set; with ``split=False``, ``(coded, n_out)``: every set's coded k-mers in one
    array and the number of each set's (a caller that stacks them again saves the round trip).
    """
    if not len(sets):
        return [] if split else (np.zeros((0, 0)), np.zeros(0, dtype=np.int64))
    lengths = np.fromiter((s.shape[0] for s in sets), dtype=np.int64, count=len(sets))
    index, n_out = kmer_index(lengths, int(window), dilation)
    flat = np.concatenate(sets, axis=0)
    # coded in chunks of 2,048 k-mers across the sets (set by set, 50,000 sets of 5-8 elements
    # were coded in 4x the time; all at once, long sets' k-mers left the cache: 1.3x)
    coded = np.empty((len(index), (index.shape[1] + 1) * flat.shape[1]), dtype=np.float64)
    for a in range(0, len(index), 2048):
        coded[a:a + 2048] = code_kmers(flat[index[a:a + 2048]].astype(np.float64, copy=False),
                                       "level_shape")
    if not split:
        return coded, np.asarray(n_out, dtype=np.int64)
    return np.split(coded, np.cumsum(n_out)[:-1])


def code_kmers(steps: np.ndarray, coding: str) -> np.ndarray:
    """k-mers given as their steps ``(m, window, d)``, written as rows: ``"plain"`` the steps one
    after the other (:func:`kmer_windows`), ``"level_shape"`` as :func:`kmer_level_shape`."""
    m, window, d = steps.shape
    if coding != "level_shape":
        return steps.reshape(m, window * d)
    level = steps.mean(1)
    return np.concatenate([(steps - level[:, None, :]).reshape(m, window * d), level], axis=1)


def kmer_dilation(estimator) -> int:
    """The k-mer dilation an estimator (or module) reads, as :func:`kmer_width` reads the width
    (1 also for models saved before dilated k-mers)."""
    d = getattr(estimator, "dilation_", None) or getattr(estimator, "dilation", 1)
    return int(d) if isinstance(d, (int, np.integer)) else 1


def kmer_width(estimator) -> int:
    """The k-mer width an estimator (or module) reads: its fitted ``window_``, else its ``window``
    (older models); 1 for ``"auto"`` not yet resolved and for estimators without k-mers."""
    w = getattr(estimator, "window_", None) or getattr(estimator, "window", 1)
    return int(w) if isinstance(w, (int, np.integer)) else 1


def check_finite_output(out, name: str, dtype, cause: str | None = None) -> None:
    """Raise a clear ``ValueError`` when an estimator's output holds NaN or infinity: the safety
    net for an overflow inside the computation (inputs are checked up front). The message names
    the compute ``dtype`` (float64 suggested only from float32); ``cause`` (the likely culprit and
    its remedy, e.g. an exp-domain Sinkhorn) replaces the generic advice about large inputs."""
    # a sum is finite when every term is (one reduction, no boolean copy); only a non-finite sum,
    # which huge finite values could also give, is checked element by element
    lib = torch if isinstance(out, torch.Tensor) else np
    ok = bool(lib.isfinite(out.sum())) or bool(lib.isfinite(out).all())
    if not ok:
        dt = dtype_name(dtype)
        if cause is None:
            cause = (f"the inputs are too large for {dt} computations; rescale the features (e.g. "
                     "standardise them)" + (" or use dtype='float64'." if dt != "float64" else "."))
        raise ValueError(f"{name} produced non-finite values from finite inputs (a numerical "
                         f"overflow or underflow in {dt}): {cause}")
