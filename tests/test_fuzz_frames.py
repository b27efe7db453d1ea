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
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skset import frame_from_sets, sets_from_frame

pl = pytest.importorskip("polars")

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


# -- skset.distributed.transform: the output is the estimator's own, whatever it returns ----------
_DIST = {}
FINALS = ["binary-lr", "multiclass-lr", "ridge-1", "ridge-2", "multi-label", "embedding",
          "otk-classifier"]
METHODS = {"binary-lr": ["predict", "predict_proba", "decision_function"],
           "multiclass-lr": ["predict", "predict_proba", "decision_function"],
           "ridge-1": ["predict"], "ridge-2": ["predict"],
           "multi-label": ["predict", "predict_proba"], "embedding": ["transform"],
           "otk-classifier": ["predict", "predict_proba", "decision_function"]}


def _dist_problem(final, dtype):
    """A pipeline ending in ``final``, fitted on 30 sets of 3 features in ``dtype``, and them."""
    if (final, dtype) not in _DIST:
        from sklearn.linear_model import LogisticRegression, Ridge
        from sklearn.multioutput import MultiOutputClassifier
        from sklearn.pipeline import make_pipeline

        from skset import OTKEmbedding
        from skset.neural_network import OTKClassifier

        rng = np.random.default_rng(0)
        c = np.arange(30) % 3
        X = [rng.normal(loc=0.8 * k, size=(int(rng.integers(2, 7)), 3)) for k in c]
        emb = OTKEmbedding(n_supports=2, random_state=0, device="cpu", dtype=dtype)
        y = {"binary-lr": c % 2, "multiclass-lr": c, "ridge-1": c + 0.5,
             "ridge-2": np.stack([c + 0.5, -c], 1), "multi-label": np.stack([c % 2, c // 2], 1),
             "embedding": None, "otk-classifier": c % 2}[final]
        steps = {"binary-lr": [emb, LogisticRegression()],
                 "multiclass-lr": [emb, LogisticRegression()], "ridge-1": [emb, Ridge()],
                 "ridge-2": [emb, Ridge()],
                 "multi-label": [emb, MultiOutputClassifier(LogisticRegression())],
                 "embedding": [emb],
                 "otk-classifier": [OTKClassifier(n_components=4, n_supports=2, max_iter=1,
                                                  random_state=0, device="cpu", dtype=dtype)]}
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _DIST[final, dtype] = make_pipeline(*steps[final]).fit(X, y), X
    return _DIST[final, dtype]


@settings(FUZZ, max_examples=max(N_EXAMPLES // 200, 1))
@given(final=st.sampled_from(FINALS), choice=st.integers(0, 2),
       dtype=st.sampled_from(["float32", "float64"]),
       container=st.sampled_from(["frame", "frame-partitioned", "bag-pairs", "bag-arrays"]),
       n_parts=st.integers(1, 4), n_sets=st.integers(1, 12), seed=st.integers(0, 2**31 - 1))
def test_fuzz_distributed_transform_equals_memory(final, choice, dtype, container, n_parts,
                                                  n_sets, seed):
    """``skset.distributed.transform`` on a dask frame or Bag gives the in-memory output of
    every method of any final step (binary / multi-class / multi-label classifiers, one or two
    regression outputs, an embedding, a skset network): one column per output column, the
    output's own dtype (float64 stays float64), the same values (1e-10 in float64)."""
    import dask
    import dask.bag as db
    import dask.dataframe as dd

    import skset.distributed as sd

    pipe, _ = _dist_problem(final, dtype)
    method = METHODS[final][choice % len(METHODS[final])]
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(int(rng.integers(2, 7)), 3)) for _ in range(n_sets)]
    ids = [f"s{i}" for i in range(n_sets)]
    ref = getattr(pipe, method)(X)
    ref = np.hstack(ref) if isinstance(ref, list) else np.asarray(ref)
    ref = ref[:, None] if ref.ndim == 1 else ref
    if container.startswith("frame"):
        rows = pd.DataFrame(np.concatenate(X), columns=list("abc"))
        rows["sid"] = np.repeat(ids, [len(x) for x in X])
        if container == "frame":
            ddf = dd.from_pandas(rows.sample(frac=1.0, random_state=seed % 1000),
                                 npartitions=n_parts)
        else:  # whole sets per partition
            groups = np.array_split(np.arange(n_sets), min(n_parts, n_sets))
            ddf = dd.from_map(lambda g: rows[rows["sid"].isin([ids[i] for i in g])], groups)
        lazy = sd.transform(pipe, ddf, by="sid", method=method,
                            partitioned=container == "frame-partitioned")
    else:
        items = list(zip(ids, X)) if container == "bag-pairs" else X
        lazy = sd.transform(pipe, db.from_sequence(items, npartitions=min(n_parts, n_sets)),
                            method=method)
    with dask.config.set(scheduler="sync"):
        out = lazy.compute()
    got = out.loc[ids] if container != "bag-arrays" else out.sort_index()
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert set(got.dtypes) == {ref.dtype}, (set(got.dtypes), ref.dtype)
    if ref.dtype.kind == "f":
        # 1e-10 where the pipeline computes in float64; a float32 network's float64 output
        # (predict_proba) carries float32 rounding, which the batches of a partition change
        tol = 1e-10 if ref.dtype == np.float64 and dtype == "float64" else 1e-5
        np.testing.assert_allclose(got.to_numpy(), ref, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got.to_numpy(), ref)
