"""Fuzzing :func:`skset.sets_from_frame` / :func:`skset.frame_from_sets` with hypothesis.

Random long frames (pandas and polars; 0-40 rows, 1-5 sets, integer, string, float or two-column
ids, an optional ``order_by`` column with ties, 1-3 feature columns of float32/float64/int/bool)
with at most one injected problem: a missing (None/NaN) id or order value, NaN or infinity in a
feature, a string feature column, an empty ``by``, a missing column, an empty frame, no feature
column, something that is not a frame. The property: without a problem the sets equal a plain
Python reference (rows grouped by id in order of first appearance, stably sorted by
``order_by``), pandas and polars agree, and ``frame_from_sets(..., frame=df)`` puts every value back
on its own row; with a problem, a ``ValueError``/``TypeError`` whose message names it.

``SKSET_FUZZ_EXAMPLES`` / ``SKSET_FUZZ_RANDOM`` as in ``tests/test_fuzz.py``.
"""

import math
import os

import numpy as np
import pandas as pd
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skset import frame_from_sets, sets_from_frame

N_EXAMPLES = int(os.environ.get("SKSET_FUZZ_EXAMPLES", 2000))
FUZZ = settings(
    max_examples=max(N_EXAMPLES // 10, 1),
    deadline=None,
    database=None,
    derandomize=not os.environ.get("SKSET_FUZZ_RANDOM"),
    suppress_health_check=list(HealthCheck),
)

PROBLEMS = [None] * 8 + ["missing-id", "missing-order", "nan-feature", "inf-feature",
                         "string-feature", "empty-by", "missing-column", "empty-frame",
                         "no-features", "not-a-frame"]
# what the error message must mention, per problem (any one of them)
KEYWORDS = {
    "missing-id": ["missing values"], "missing-order": ["missing values"],
    "nan-feature": ["NaN"], "inf-feature": ["infinity", "NaN"],
    "string-feature": ["numeric", "f_str"], "empty-by": ["by"], "missing-column": ["nope"],
    "empty-frame": ["no rows", "empty"], "no-features": ["feature"],
    "not-a-frame": ["frame", "DataFrame"],
}


@st.composite
def frames(draw):
    n = draw(st.integers(1, 40))
    n_ids = draw(st.integers(1, 5))
    id_kind = draw(st.sampled_from(["int", "str", "float", "pair"]))
    order = draw(st.booleans())
    n_feat = draw(st.integers(1, 3))
    dtypes = draw(st.lists(st.sampled_from(["float64", "float32", "int64", "bool"]),
                           min_size=n_feat, max_size=n_feat))
    problem = draw(st.sampled_from(PROBLEMS))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    codes = rng.integers(0, n_ids, n)
    data = {}
    if id_kind == "pair":
        data["a"] = codes % 2
        data["b"] = [f"g{c // 2}" for c in codes]
        by = ["a", "b"]
    else:
        data["s"] = {"int": codes * 7 - 3, "str": [f"set{c}" for c in codes],
                     "float": codes * 0.5}[id_kind]
        by = "s"
    if order:
        data["t"] = rng.integers(0, 4, n).astype(float)  # ties: the sort must be stable
    for j, dt in enumerate(dtypes):
        col = rng.normal(size=n) * 10.0 ** rng.integers(-20, 21)
        if dt == "int64":
            col = np.clip(np.round(col), -2**62, 2**62)
        data[f"f{j}"] = (col > 0) if dt == "bool" else col.astype(dt)
    kw = dict(by=by, order_by="t" if order else None)
    r = int(rng.integers(n))
    first_by = by if isinstance(by, str) else by[0]
    if problem == "missing-id":
        col = list(data[first_by])
        col[r] = None
        data[first_by] = col
    elif problem == "missing-order":
        if not order:
            problem = None
        else:
            data["t"][r] = math.nan
    elif problem in ("nan-feature", "inf-feature"):
        if dtypes[0] not in ("float64", "float32"):
            problem = None
        else:
            data["f0"][r] = math.nan if problem == "nan-feature" else -math.inf
    elif problem == "string-feature":
        data["f_str"] = [str(v) for v in range(n)]
    elif problem == "empty-by":
        kw["by"] = draw(st.sampled_from([[], ()]))
    elif problem == "missing-column":
        kw["columns"] = ["f0", "nope"]
    elif problem == "no-features":
        data = {k: v for k, v in data.items() if not k.startswith("f")}
    lib = draw(st.sampled_from(["pandas", "polars"]))
    return lib, data, kw, problem


def _make(lib, data):
    if lib == "pandas":
        return pd.DataFrame(data)
    return pl.DataFrame({k: (list(v) if isinstance(v, list) else v) for k, v in data.items()},
                        strict=False)


def _reference(data, kw):
    """Sets and ids by plain Python: group by id in order of first appearance, stable sort."""
    by = [kw["by"]] if isinstance(kw["by"], str) else list(kw["by"])
    feats = [k for k in data if k not in by and k != kw.get("order_by")]
    n = len(data[feats[0]])
    keys = [tuple(data[b][i] for b in by) if len(by) > 1 else data[by[0]][i] for i in range(n)]
    ids, rows = [], {}
    for i, k in enumerate(keys):
        if k not in rows:
            ids.append(k)
            rows[k] = []
        rows[k].append(i)
    all32 = all(np.asarray(data[f]).dtype == np.float32 for f in feats)
    X = np.column_stack([np.asarray(data[f], dtype=np.float64) for f in feats])
    sets = []
    for k in ids:
        idx = rows[k]
        if kw.get("order_by"):
            idx = sorted(idx, key=lambda i: data["t"][i])
        sets.append(X[idx].astype(np.float32 if all32 else np.float64))
    return sets, ids


@FUZZ
@given(case=frames())
def test_fuzz_sets_from_frame(case):
    lib, data, kw, problem = case
    if problem == "empty-frame":
        df = _make(lib, data).head(0)
    elif problem == "not-a-frame":
        df = {k: np.asarray(v) for k, v in data.items()}
    else:
        df = _make(lib, data)
    try:
        sets, ids = sets_from_frame(df, **kw)
    except (ValueError, TypeError) as exc:
        assert problem is not None, f"valid frame refused: {exc!r}"
        assert any(k in str(exc) for k in KEYWORDS[problem]), (
            f"{problem}: the message names none of {KEYWORDS[problem]}: {exc!r}")
        return
    assert problem is None, f"{problem} was accepted"
    ref_sets, ref_ids = _reference(data, kw)
    assert [tuple(i) if isinstance(i, tuple) else i for i in ids] == ref_ids
    assert len(sets) == len(ref_sets)
    for got, want in zip(sets, ref_sets, strict=True):
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want)
    # the other back end gives the same sets
    other = _make("polars" if lib == "pandas" else "pandas", data)
    sets2, ids2 = sets_from_frame(other, **kw)
    assert list(ids2) == list(ids)
    for a, b in zip(sets, sets2, strict=True):
        np.testing.assert_array_equal(a, b)
    # back to the rows: each row gets its own element's values
    out = frame_from_sets([s.astype(np.float64) for s in sets], ids, by=kw["by"],
                          columns=[f"back{j}" for j in range(sets[0].shape[1])], frame=df,
                          order_by=kw["order_by"])
    assert type(out) is type(df)
    feats = [c for c in data if c.startswith("f")]
    back = np.column_stack([np.asarray(out[f"back{j}"]) for j in range(len(feats))])
    np.testing.assert_array_equal(back,
                                  np.column_stack([np.asarray(data[f], dtype=np.float64)
                                                   for f in feats]))
