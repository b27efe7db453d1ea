"""skset.sets_from_frame / skset.frame_from_sets: long data frames (pandas, polars) to sets and back.

The reference is a plain loop over pandas' ``groupby(sort=False)`` (or a dict of row lists)."""

import doctest
import re
from pathlib import Path

import numpy as np
import pytest

import skset
from skset import NystromFeatures, frame_from_sets, sets_from_frame

pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")

ROOT = Path(__file__).resolve().parents[1]
LIBS = {"pandas": pd, "polars": pl}


def _make(lib, data):
    return LIBS[lib].DataFrame(data)


def _long_table(rng, n_rows=600, n_sets=17, shuffle=True):
    """A long table whose rows of one set are scattered, with ties in the time column."""
    sample = rng.integers(0, n_sets, n_rows)
    return {
        "sample": np.array([f"s{i:02d}" for i in sample]),
        "batch": rng.integers(0, 2, n_rows),
        "time": rng.integers(0, 10, n_rows),   # many ties: order_by must be stable
        "a": rng.normal(size=n_rows),
        "b": rng.normal(size=n_rows).astype(np.float32),
        "c": rng.integers(-5, 5, n_rows),
    }


def _reference(data, by, columns, order_by=None):
    """Sets by a Python loop over rows: first appearance of the key, then stable order_by."""
    keys = list(zip(*[data[b] for b in by]))
    groups: dict = {}
    for i, k in enumerate(keys):
        groups.setdefault(k, []).append(i)
    sets = []
    for rows in groups.values():
        rows = np.array(rows)
        if order_by is not None:
            rows = rows[np.argsort(data[order_by][rows], kind="stable")]
        sets.append(np.column_stack([data[c][rows].astype(np.float64) for c in columns]))
    return sets, list(groups)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("order_by", [None, "time"])
def test_sets_match_a_loop_over_rows(lib, order_by):
    data = _long_table(np.random.default_rng(0))
    sets, ids = sets_from_frame(_make(lib, data), by="sample", columns=["a", "b", "c"],
                                order_by=order_by)
    ref_sets, ref_keys = _reference(data, ["sample"], ["a", "b", "c"], order_by)
    assert ids == [k[0] for k in ref_keys]  # order of first appearance, scalars for one column
    assert len(sets) == len(ref_sets)
    for s, r in zip(sets, ref_sets):
        assert s.dtype == np.float64
        np.testing.assert_allclose(s, r, rtol=1e-7)  # the float32 column is widened exactly


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("kind", ["two columns", "strings", "datetimes"])
def test_order_by_kinds(lib, kind):
    """order_by on several columns, on text and on dates: a stable sort like a loop's."""
    rng = np.random.default_rng(5)
    data = _long_table(rng)
    if kind == "two columns":
        order_by, key = ["batch", "time"], data["batch"] * 100 + data["time"]
    elif kind == "strings":
        data["code"] = np.array([f"t{t}" for t in data["time"]])  # text: the frame sorts it
        order_by, key = "code", data["code"]
    else:
        data["when"] = np.datetime64("2024-01-01") + data["time"].astype("timedelta64[D]")
        order_by, key = "when", data["when"]
    sets, _ = sets_from_frame(_make(lib, data), by="sample", columns=["a"], order_by=order_by)
    ref_sets, _ = _reference({**data, "key": key}, ["sample"], ["a"], "key")
    for s, r in zip(sets, ref_sets):
        np.testing.assert_array_equal(s, r)


@pytest.mark.parametrize("lib", LIBS)
def test_several_by_columns_give_tuple_ids(lib):
    data = _long_table(np.random.default_rng(1))
    sets, ids = sets_from_frame(_make(lib, data), by=["sample", "batch"], columns=["a"],
                                order_by="time")
    ref_sets, ref_keys = _reference(data, ["sample", "batch"], ["a"], "time")
    assert [tuple(i) for i in ids] == [tuple(k) for k in ref_keys]
    assert all(isinstance(i, tuple) for i in ids)
    for s, r in zip(sets, ref_sets):
        np.testing.assert_array_equal(s, r)
    # a one-element list also gives tuples (like pandas' groupby with a list)
    _, ids1 = sets_from_frame(_make(lib, data), by=["sample"], columns=["a"])
    assert ids1[0] == (data["sample"][0],)


@pytest.mark.parametrize("lib", LIBS)
def test_default_columns_and_dtype(lib):
    n = 6
    data = {"t": np.arange(n)[::-1], "sample": np.array([1, 2, 1, 1, 2, 3]),
            "x": np.arange(n, dtype=np.float32), "y": np.ones(n, dtype=np.float32)}
    sets, ids = sets_from_frame(_make(lib, data), by="sample", order_by="t")
    assert ids == [1, 2, 3] and all(type(i) is int for i in ids)
    assert [s.dtype for s in sets] == [np.float32] * 3  # every feature float32: kept
    np.testing.assert_array_equal(sets[0], [[3, 1], [2, 1], [0, 1]])  # t descending in the frame
    # without order_by, "t" is a feature and the frame's order is kept
    sets, _ = sets_from_frame(_make(lib, data), by="sample")
    assert sets[0].dtype == np.float64 and sets[0].shape == (3, 3)
    np.testing.assert_array_equal(sets[0][:, 0], [5, 3, 2])


def test_pandas_categorical_and_nullable_columns():
    frame = pd.DataFrame({
        "sample": pd.Categorical(["b", "a", "b", "c"], categories=["c", "b", "a", "z"]),
        "x": pd.array([1, 2, 3, 4], dtype="Int64"),
        "on": [True, False, True, True],
    }, index=["c9", "c3", "c1", "c7"])
    sets, ids = sets_from_frame(frame, by="sample")
    assert ids == ["b", "a", "c"]  # first appearance, not the categories' order
    np.testing.assert_array_equal(sets[0], [[1, 1], [3, 1]])
    frame.loc["c1", "x"] = pd.NA
    # the row named by its index label (the same in any partition of a dask frame)
    with pytest.raises(ValueError, match=r"set 'b' has NaN in column 'x' \(index 'c1'"):
        sets_from_frame(frame, by="sample")


@pytest.mark.parametrize("lib", LIBS)
def test_errors(lib):
    data = {"sample": ["a", "a", "b"], "x": [1.0, 2.0, 3.0], "name": ["u", "v", "w"]}
    frame = _make(lib, data)
    with pytest.raises(ValueError, match=r"by: column\(s\) \['patient'\] not in the frame"):
        sets_from_frame(frame, by="patient")
    with pytest.raises(ValueError, match=r"columns: column\(s\) \['y'\] not in the frame"):
        sets_from_frame(frame, by="sample", columns=["x", "y"])
    with pytest.raises(ValueError, match=r"order_by: column\(s\) \['t'\]"):
        sets_from_frame(frame, by="sample", columns=["x"], order_by="t")
    with pytest.raises(TypeError, match=r"not numeric: \{'name'"):
        sets_from_frame(frame, by="sample")
    with pytest.raises(ValueError, match="both set ids"):
        sets_from_frame(frame, by="sample", columns=["sample", "x"])
    with pytest.raises(ValueError, match="no feature columns"):
        sets_from_frame(_make(lib, {"sample": ["a"]}), by="sample")
    with pytest.raises(ValueError, match="empty"):
        sets_from_frame(_make(lib, {"sample": [], "x": []}), by="sample")
    for bad, kind in [(np.nan, "NaN"), (np.inf, "infinity"), (-np.inf, "infinity")]:
        f = _make(lib, {"sample": ["a", "b", "b"], "x": [1.0, 2.0, 3.0], "y": [1.0, 2.0, bad]})
        with pytest.raises(ValueError, match=rf"set 'b' has {kind} in column 'y' \((row|index) 2"):
            sets_from_frame(f, by="sample")
    with pytest.raises(ValueError, match="missing values"):
        sets_from_frame(_make(lib, {"sample": ["a", None], "x": [1.0, 2.0]}), by="sample")
    with pytest.raises(ValueError, match="order_by.*missing values"):
        sets_from_frame(_make(lib, {"sample": ["a", "a"], "t": [1.0, None], "x": [1.0, 2.0]}),
                        by="sample", order_by="t")


def test_not_a_frame():
    with pytest.raises(TypeError, match="must be a data frame.*got builtins.list"):
        sets_from_frame([[1.0, 2.0]], by="sample")
    with pytest.raises(TypeError, match="got numpy.ndarray"):
        sets_from_frame(np.zeros((3, 2)), by="sample")
    with pytest.raises(TypeError, match="lazy: call .collect"):
        sets_from_frame(pl.DataFrame({"s": [1], "x": [1.0]}).lazy(), by="s")
    with pytest.raises(TypeError, match="Series"):
        sets_from_frame(pd.Series([1.0]), by="s")
    with pytest.raises(TypeError, match="column name"):
        sets_from_frame(pd.DataFrame({"s": [1], "x": [1.0]}), by=3)


@pytest.mark.parametrize("lib", LIBS)
def test_round_trip_new_frame(lib):
    data = _long_table(np.random.default_rng(2))
    sets, ids = sets_from_frame(_make(lib, data), by=["sample", "batch"], columns=["a", "c"])
    out = frame_from_sets(sets, ids, by=["sample", "batch"], columns=["a", "c"], backend=lib)
    assert type(out) is type(_make(lib, data))
    assert list(out.columns) == ["sample", "batch", "a", "c"] and len(out) == len(data["a"])
    back, back_ids = sets_from_frame(out, by=["sample", "batch"])
    assert back_ids == ids
    for s, r in zip(back, sets):
        np.testing.assert_array_equal(s, r)
    # one id column from a string: ids keep their type
    labels = [np.arange(len(s)) for s in sets]
    out = frame_from_sets(labels, [i[0] for i in ids], by="sample", columns="cluster", backend=lib)
    assert list(out.columns) == ["sample", "cluster"]
    assert out["cluster"].dtype in (np.int64, pl.Int64) and out["sample"][0] == ids[0][0]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("order_by", [None, "time"])
def test_values_go_back_next_to_their_rows(lib, order_by):
    data = _long_table(np.random.default_rng(3))
    frame = _make(lib, data)
    sets, ids = sets_from_frame(frame, by="sample", columns=["a", "b"], order_by=order_by)
    # per-element values that identify the element: its own features
    out = frame_from_sets(sets, ids, by="sample", columns=["a2", "b2"], frame=frame,
                          order_by=order_by)
    assert type(out) is type(frame) and list(out.columns) == [*data, "a2", "b2"]
    np.testing.assert_array_equal(np.asarray(out["a2"]), data["a"])
    np.testing.assert_allclose(np.asarray(out["b2"]), data["b"])
    # a subset of the sets, in another order: the other rows are missing
    some = [2, 0]
    out = frame_from_sets([sets[i][:, 0] for i in some], [ids[i] for i in some], by="sample",
                          columns="z", frame=frame, order_by=order_by)
    z = np.asarray(out["z"].to_numpy() if lib == "polars" else out["z"], dtype=float)
    chosen = np.isin(data["sample"], [ids[i] for i in some])
    np.testing.assert_array_equal(z[chosen], data["a"][chosen])
    assert np.isnan(z[~chosen]).all()
    if lib == "polars":
        assert out["z"].null_count() == (~chosen).sum()


def test_frame_keeps_index_and_columns():
    frame = pd.DataFrame({"sample": ["b", "a", "b"], "x": [1.0, 2.0, 3.0]}, index=["r2", "r0", "r1"])
    sets, ids = sets_from_frame(frame, by="sample")
    out = frame_from_sets([2 * s for s in sets], ids, by="sample", columns="x2", frame=frame)
    assert list(out.index) == ["r2", "r0", "r1"]
    np.testing.assert_array_equal(out["x2"], [2.0, 4.0, 6.0])
    assert "x2" not in frame.columns  # the input frame is not modified


@pytest.mark.parametrize("lib", LIBS)
def test_frame_from_sets_errors(lib):
    frame = _make(lib, {"sample": ["a", "a", "b"], "x": [1.0, 2.0, 3.0]})
    sets, ids = sets_from_frame(frame, by="sample")
    with pytest.raises(ValueError, match="2 set.* but ids 1"):
        frame_from_sets(sets, ids[:1])
    with pytest.raises(ValueError, match=r"set 'a' has 1 value row\(s\) but 2 row\(s\) in frame.*window"):
        frame_from_sets([s[1:] for s in sets], ids, by="sample", frame=frame)
    with pytest.raises(ValueError, match="'c'.* is not a set of frame"):
        frame_from_sets(sets, ["a", "c"], by="sample", frame=frame)
    with pytest.raises(ValueError, match="already has column"):
        frame_from_sets(sets, ids, by="sample", columns="x", frame=frame)
    with pytest.raises(ValueError, match="columns names 2 column"):
        frame_from_sets(sets, ids, columns=["u", "v"])
    with pytest.raises(ValueError, match="tuple of 2"):
        frame_from_sets(sets, ids, by=["sample", "batch"])
    with pytest.raises(ValueError, match="transpose"):
        frame_from_sets([np.zeros((1, 2, 3))], ["a"])
    with pytest.raises(TypeError, match="list of arrays"):
        frame_from_sets(3.0, ["a"])


@pytest.mark.parametrize("lib", LIBS)
def test_pipeline_outputs_back_to_rows(lib):
    """The user's path: frame -> sets -> per-element Nystrom features -> columns of the frame."""
    data = _long_table(np.random.default_rng(4), n_rows=300, n_sets=6)
    frame = _make(lib, data)
    sets, ids = sets_from_frame(frame, by="sample", columns=["a", "b"])
    nys = NystromFeatures(n_components=4, random_state=0).fit(sets)
    feats = nys.transform(sets)
    out = frame_from_sets(feats, ids, by="sample", columns="nys", frame=frame)
    # row r gets the features of its own element: transform the row alone and compare
    rows = np.column_stack([data["a"], data["b"]])
    np.testing.assert_allclose(np.column_stack([np.asarray(out[f"nys{j}"]) for j in range(4)]),
                               nys.transform(rows), rtol=1e-5, atol=1e-6)


def test_default_backend_and_names():
    out = frame_from_sets([np.zeros((2, 3))], ["a"])
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == ["set_id", "x0", "x1", "x2"]
    out = frame_from_sets(np.zeros((2, 4, 2)), [0, 1], columns="z", backend="polars")
    assert isinstance(out, pl.DataFrame) and out.columns == ["set_id", "z0", "z1"]
    assert out["set_id"].to_list() == [0] * 4 + [1] * 4


def test_exported():
    assert {"sets_from_frame", "frame_from_sets"} <= set(skset.__all__)


def test_input_formats_doc_examples_run():
    """The data-frame section of docs/input_formats.rst is a doctest: it must run as written."""
    text = (ROOT / "docs" / "input_formats.rst").read_text()
    assert re.search(r"^Data frames", text, re.M)
    failures, tried = doctest.testfile(str(ROOT / "docs" / "input_formats.rst"),
                                       module_relative=False, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried > 3 and failures == 0


def test_sets_are_not_views_of_the_frame():
    # one feature column, rows already grouped: the sets were read-only views of the frame's
    # memory, and a later edit of the frame changed them
    df = pd.DataFrame({"sid": [0, 0, 1, 1], "x": [1.0, 2.0, 3.0, 4.0]})
    sets, _ = sets_from_frame(df, by="sid")
    df.loc[0, "x"] = 99.0
    assert sets[0][:, 0].tolist() == [1.0, 2.0]


def test_unnamed_columns_and_missing_booleans_are_named():
    # pd.DataFrame(matrix) has integer column names (the frame library's error named none of
    # them); a missing value in a nullable boolean column is a NaN like any other (a bare
    # float(NAType) TypeError before)
    df = pd.DataFrame(np.arange(8.0).reshape(4, 2))
    df["sid"] = [0, 0, 1, 1]
    with pytest.raises(TypeError, match=r"not: \[0, 1\]"):
        sets_from_frame(df, by="sid")
    flags = pd.DataFrame({"sid": ["a", "a", "b"], "flag": pd.array([True, None, False],
                                                                     dtype="boolean")})
    with pytest.raises(ValueError, match="set 'a' has NaN in column 'flag'"):
        sets_from_frame(flags, by="sid")
    flags.loc[1, "flag"] = True
    assert sets_from_frame(flags, by="sid")[0][0][:, 0].tolist() == [1.0, 1.0]


def test_a_missing_value_of_a_nullable_column_is_named_as_nan():
    """A pandas ``Int64`` / ``Float64`` column holding ``NA`` in a set given as a frame: the
    NaN error that ``sets_from_frame`` gives (a TypeError said the values were not numeric)."""
    pd = pytest.importorskip("pandas")
    ok = pd.DataFrame({"u": pd.array([1, 2, 3], dtype="Int64"), "v": [0.1, 0.2, 0.3]})
    for dtype in ("Int64", "Float64"):
        bad = pd.DataFrame({"u": pd.array([1, None, 3], dtype=dtype), "v": [0.1, 0.2, 0.3]})
        with pytest.raises(ValueError, match="set 1 contains NaN"):
            NystromFeatures(2, random_state=0).fit([ok, bad])
    assert len(NystromFeatures(2, random_state=0).fit_transform([ok, ok])) == 2
