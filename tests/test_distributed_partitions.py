"""The backend-neutral layer of skset.distributed (``_partitions``: pandas and numpy only), driven
by a plain loop over pandas frames, as a Ray or Spark driver would drive it: the output equals the
estimator's on the sets in memory; and what estimators declare to a driver (``_output_rows``)."""

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.pipeline import make_pipeline

import skset.utils
from skset import NystromFeatures, OTKEmbedding
from skset._steps import final_step, first_step, output_rows, partial_fit_steps
from skset.distributed import _partitions as P


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    y = np.arange(40) % 2
    X = [rng.normal(loc=c, size=(int(rng.integers(3, 9)), 3)) for c in y]
    ids = [f"s{i}" for i in range(40)]
    rows = pd.DataFrame(np.concatenate(X), columns=list("abc"))
    rows["sid"] = np.repeat(ids, [len(s) for s in X])
    rows["t"] = np.concatenate([np.arange(len(s)) for s in X])
    rows["label"] = np.repeat(y, [len(s) for s in X])
    return X, y, ids, rows


def _by_set(rows, n_parts):
    """Partitions of whole sets, as a backend would hold them."""
    groups = np.array_split(rows["sid"].unique(), n_parts)
    return [rows[rows["sid"].isin(g)] for g in groups]


def test_a_plain_driver_gives_the_estimators_own_output(problem):
    X, y, ids, rows = problem
    pipe = make_pipeline(NystromFeatures(n_components=8, random_state=0),
                         OTKEmbedding(n_supports=3, random_state=0),
                         LogisticRegression()).fit(X, y)
    for method in ("transform", "predict_proba", "predict"):
        local = pipe[:2] if method == "transform" else pipe
        P.check_method(method)
        P.check_transformable(local, method)
        names, dtype = P.output_schema(local, method)
        meta = P.empty_output(names, dtype, "sid", object)
        parts = _by_set(rows, 3) + [rows.iloc[:0]]  # an empty partition gives meta
        out = pd.concat([P.frame_partition(p, local, "sid", list("abc"), "t", method, names, meta)
                         for p in parts])
        want = getattr(local, method)(X)
        want = want[:, None] if want.ndim == 1 else want
        np.testing.assert_allclose(out.loc[ids].to_numpy(dtype=float), want.astype(float),
                                   rtol=1e-5, atol=1e-6)
        assert list(out.columns) == names and out.index.name == "sid"
    assert names == ["prediction"]
    with pytest.raises(ValueError, match="rows in partitions 0 and 1"):
        P.check_unique([P.ids_of(p, "sid") for p in (rows.iloc[:5], rows.iloc[3:9])], "sid")


def test_a_plain_driver_fits_by_chunks(problem):
    """``frame_chunk`` per partition then ``skset.utils.partial_fit``: the same model as
    ``partial_fit`` on the same chunks of sets in memory."""
    X, y, ids, rows = problem

    def pipe():
        return make_pipeline(NystromFeatures(n_components=8, random_state=0),
                             OTKEmbedding(n_supports=3, random_state=0),
                             SGDClassifier(loss="log_loss", random_state=0))

    parts = _by_set(rows, 2)
    driven, memory = pipe(), pipe()
    for p in parts:
        sets, labels, chunk_ids = P.frame_chunk(p, "sid", list("abc"), "t", "label", None)
        assert chunk_ids == list(pd.unique(p["sid"]))
        skset.utils.partial_fit(driven, sets, labels, classes=[0, 1])
        chunk = [ids.index(s) for s in pd.unique(p["sid"])]
        skset.utils.partial_fit(memory, [X[i] for i in chunk], y[chunk], classes=[0, 1])
    np.testing.assert_array_equal(driven.predict_proba(X), memory.predict_proba(X))
    bad = rows.copy()
    bad.loc[bad.index[1], "label"] = 1 - bad.loc[bad.index[1], "label"]
    with pytest.raises(ValueError, match="constant within each set; set 's0'"):
        P.frame_chunk(bad, "sid", list("abc"), "t", "label", None)


def test_estimators_declare_their_output_rows():
    nys, otk = NystromFeatures(), OTKEmbedding()
    assert output_rows(nys) == "element"
    assert output_rows(make_pipeline(otk, nys)) == "element"
    assert output_rows(otk) == "set" and output_rows(make_pipeline(nys, otk)) == "set"
    assert output_rows(LogisticRegression()) == "set"  # declares nothing: one row per set
    assert output_rows(make_pipeline(otk, "passthrough")) == "set"
    assert first_step(make_pipeline("passthrough", otk)) is otk
    assert final_step(make_pipeline(nys, otk)) is otk
    with pytest.raises(TypeError, match="NystromFeatures maps elements"):
        P.check_transformable(make_pipeline(otk, nys), "transform")
    with pytest.raises(TypeError, match="'logisticregression'.*no partial_fit"):
        partial_fit_steps(make_pipeline(nys, LogisticRegression()))
