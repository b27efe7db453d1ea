"""skset.distributed.fit: an estimator or a Pipeline fitted with partial_fit on the partitions of
a dask collection, one partition at a time; with one partition it equals partial_fit in memory."""

import copy

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.pipeline import make_pipeline

import skset.utils
from skset import NystromFeatures, OTKEmbedding, sets_from_frame
from skset.neural_network import OTKClassifier

dask = pytest.importorskip("dask")
dd = pytest.importorskip("dask.dataframe")
db = pytest.importorskip("dask.bag")
sd = pytest.importorskip("skset.distributed")

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                        "ignore::UserWarning")


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    n = 80
    y = np.arange(n) % 2
    X = [rng.normal(loc=1.5 * c, size=(int(rng.integers(3, 9)), 3)) for c in y]
    ids = [f"s{i}" for i in range(n)]
    rows = pd.DataFrame(np.concatenate(X), columns=list("abc"))
    rows["sid"] = np.repeat(ids, [len(s) for s in X])
    rows["t"] = np.concatenate([np.arange(len(s)) for s in X])
    rows["label"] = np.repeat(y, [len(s) for s in X])
    return X, y, ids, rows


def _pipe(final=None):
    return make_pipeline(NystromFeatures(n_components=8, random_state=0),
                         OTKEmbedding(n_supports=3, epsilon=0.5, random_state=0),
                         final or SGDClassifier(loss="log_loss", random_state=0))


def _otkc():
    return OTKClassifier(n_components=8, n_supports=3, random_state=0)


def test_pipeline_on_a_frame_streams_partitions(problem, monkeypatch):
    X, y, ids, rows = problem
    seen = []
    real = skset.utils.partial_fit

    def spy(est, sets, labels, **kw):
        seen.append(len(sets))
        return real(est, sets, labels, **kw)

    monkeypatch.setattr(skset.utils, "partial_fit", spy)
    ddf = dd.from_pandas(rows.sample(frac=1.0, random_state=0), npartitions=4)
    with dask.config.set(scheduler="sync"):
        pipe = sd.fit(_pipe(), ddf, by="sid", order_by="t", y="label", classes=[0, 1],
                      epochs=3)
    assert len(seen) == 3 * 4 and max(seen) < len(X) and sum(seen) == 3 * len(X)
    assert pipe.score(X, y) >= 0.9
    assert pipe[0].n_steps_ == 3 * 4 and pipe[0].n_features_in_ == 3  # label column left out


def test_a_shuffled_frame_fits_alike_whatever_its_row_order(problem):
    # the same rows in two orders (and over other input partitions): after the shuffle on the id,
    # each partition is read by set id, each set's rows by the frame's index, so both fits see
    # the same chunks (as the shuffle's own row order, which varies from run to run, would not)
    X, _, _, rows = problem
    fits = []
    for seed in (0, 1):
        ddf = dd.from_pandas(rows.sample(frac=1.0, random_state=seed), npartitions=4, sort=False)
        with dask.config.set(scheduler="sync"):
            fits.append(sd.fit(_pipe(), ddf, by="sid", columns=list("abc"), y="label",
                               classes=[0, 1], epochs=2))
    np.testing.assert_array_equal(fits[0][0].anchors_, fits[1][0].anchors_)
    np.testing.assert_array_equal(fits[0].predict_proba(X), fits[1].predict_proba(X))


def test_in_id_order_sorts_by_id_then_index():
    pdf = pd.DataFrame({"sid": ["b", "a", "b", "a"], "v": [1.0, 2.0, 3.0, 4.0]},
                       index=[7, 5, 2, 9])
    from skset.distributed._partitions import in_id_order

    out = in_id_order(pdf, "sid")
    assert out["sid"].tolist() == ["a", "a", "b", "b"] and out.index.tolist() == [5, 9, 2, 7]
    assert pdf["v"].tolist() == [1.0, 2.0, 3.0, 4.0]  # the partition itself is left as it was
    mixed = pd.DataFrame({"sid": [2, "a", 1]}, index=[0, 1, 2])  # ids that cannot be sorted
    assert in_id_order(mixed, "sid").index.tolist() == [0, 1, 2]
    # an index that repeats (read_csv, concat: each file's rows from 0): the rows' values break
    # the ties, so every arrival order of the same rows gives one order
    rep = pd.DataFrame({"sid": ["a", "b", "a", "a", "b"], "v": [4.0, 1.0, 2.0, 3.0, 0.0]},
                       index=[0, 0, 1, 0, 1])
    orders = {tuple(in_id_order(rep.iloc[p], "sid")["v"]) for p in
              ([0, 1, 2, 3, 4], [3, 4, 2, 1, 0], [2, 0, 4, 3, 1])}
    assert orders == {(3.0, 4.0, 2.0, 1.0, 0.0)}
    # an index named like the id column (set_index(by, drop=False)) is not ambiguous
    named = pdf.set_index("sid", drop=False)
    assert in_id_order(named, "sid")["v"].tolist() == [2.0, 4.0, 1.0, 3.0]


@pytest.mark.parametrize("make", [_pipe, _otkc], ids=["pipeline", "OTKClassifier"])
def test_one_partition_equals_partial_fit_in_memory(problem, make):
    _, _, _, rows = problem
    ddf = dd.from_pandas(rows, npartitions=1)
    with dask.config.set(scheduler="sync"):
        got = sd.fit(make(), ddf, by="sid", order_by="t", y="label", classes=[0, 1],
                     epochs=2, partitioned=True)
    sets, sids = sets_from_frame(rows, by="sid", columns=list("abc"), order_by="t")
    labels = rows.groupby("sid")["label"].first().loc[sids].to_numpy()
    want = make()
    for _ in range(2):
        skset.utils.partial_fit(want, sets, labels, classes=[0, 1])
    np.testing.assert_array_equal(got.predict_proba(sets), want.predict_proba(sets))


def test_otk_classifier_on_a_bag(problem):
    X, y, ids, _ = problem
    triples = db.from_sequence(list(zip(ids, X, y)), npartitions=3)
    pairs = db.from_sequence(list(zip(ids, X)), npartitions=3)
    with dask.config.set(scheduler="sync"):
        a = sd.fit(_otkc(), triples, classes=[0, 1], epochs=2)
        b = sd.fit(_otkc(), pairs, y=dd.from_pandas(pd.Series(y, index=ids), npartitions=2),
                   classes=[0, 1], epochs=2)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    assert a.score(X, y) >= 0.9


def test_on_a_local_cluster_equals_the_local_scheduler(problem):
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    X, _, _, rows = problem
    by_set = rows.sort_values(["sid", "t"])
    by_set.index = by_set["sid"].to_numpy()  # divisions on the set id: each set in one partition
    ddf = dd.from_pandas(by_set, npartitions=3)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster):
        remote = sd.fit(_pipe(), ddf, by="sid", order_by="t", y="label", classes=[0, 1],
                        epochs=2, partitioned=True)
        # sets across partitions: shuffled and persisted on the worker once
        mixed = dd.from_pandas(rows.sample(frac=1.0, random_state=1), npartitions=3)
        shuffled = sd.fit(_pipe(), mixed, by="sid", order_by="t", y="label", classes=[0, 1],
                          epochs=2)
    assert shuffled.score(X, problem[1]) >= 0.9
    with dask.config.set(scheduler="sync"):
        local = sd.fit(_pipe(), ddf, by="sid", order_by="t", y="label", classes=[0, 1],
                       epochs=2, partitioned=True)
    np.testing.assert_array_equal(remote.predict_proba(X), local.predict_proba(X))


def test_frame_made_by_from_map_on_a_cluster(problem):
    """dask computes a from_map frame's meta through the client: distributed.fit once hung
    there (each partition computed as data.partitions[i] inside client.compute)."""
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    X, y, _, rows = problem
    groups = np.array_split(rows["sid"].unique(), 4)

    def part(i):
        return rows[rows["sid"].isin(groups[i])]

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster):
        pipe = sd.fit(_pipe(), dd.from_map(part, range(4)), by="sid", order_by="t", y="label",
                      classes=[0, 1], epochs=2, partitioned=True)
    assert pipe[0].n_steps_ == 8 and pipe.score(X, y) >= 0.9


def test_bad_input(problem):
    X, y, ids, rows = problem
    ddf = dd.from_pandas(rows, npartitions=2)
    with dask.config.set(scheduler="sync"):
        with pytest.raises(TypeError, match="'logisticregression'.*no partial_fit"):
            sd.fit(_pipe(LogisticRegression()), ddf, by="sid", y="label", classes=[0, 1])
        with pytest.raises(ValueError, match="classes="):
            sd.fit(_pipe(), ddf, by="sid", y="label")
        bad = rows.copy()
        bad.loc[bad.index[1], "label"] = 1 - bad.loc[bad.index[1], "label"]
        with pytest.raises(ValueError, match="constant within each set; set 's0'"):
            sd.fit(_pipe(), dd.from_pandas(bad, npartitions=2), by="sid", y="label",
                   classes=[0, 1])
        with pytest.raises(ValueError, match="no label"):
            sd.fit(_pipe(), ddf, by="sid", y=pd.Series(y[:10], index=ids[:10]),
                   columns=list("abc"), classes=[0, 1])
        with pytest.raises(ValueError, match="by="):
            sd.fit(_pipe(), ddf, y="label", classes=[0, 1])
        with pytest.raises(ValueError, match="not a column"):
            sd.fit(_pipe(), ddf, by="sid", y="nope", classes=[0, 1])
        with pytest.raises(ValueError, match="epochs"):
            sd.fit(_pipe(), ddf, by="sid", y="label", classes=[0, 1], epochs=0)
        with pytest.raises(TypeError, match="dask DataFrame or Bag"):
            sd.fit(_pipe(), rows, by="sid", y="label", classes=[0, 1])
        with pytest.raises(ValueError, match="needs a frame"):
            sd.fit(_pipe(), db.from_sequence(X), y="label", classes=[0, 1])
        # nothing was learned before the errors above: a pipeline is checked first
        pipe = _pipe(LogisticRegression())
        with pytest.raises(TypeError):
            sd.fit(pipe, ddf, by="sid", y="label", classes=[0, 1])
        assert not hasattr(pipe[0], "anchors_")


def test_utils_partial_fit_rules():
    rng = np.random.default_rng(1)
    X = [rng.normal(size=(4, 2)) for _ in range(10)]
    y = np.arange(10) % 2
    with pytest.raises(ValueError, match="classes="):
        skset.utils.partial_fit(_otkc(), X, y)
    with pytest.raises(TypeError, match="LogisticRegression has no partial_fit"):
        skset.utils.partial_fit(LogisticRegression(), X, y)
    # unsupervised steps take no classes; inputs untouched
    kept = copy.deepcopy(X)
    emb = make_pipeline(NystromFeatures(n_components=4, random_state=0),
                        OTKEmbedding(n_supports=2, random_state=0))
    skset.utils.partial_fit(emb, X)
    skset.utils.partial_fit(emb, X)
    assert emb[1].n_steps_ == 2 and emb.transform(X).shape == (10, 8)
    for a, b in zip(X, kept):
        np.testing.assert_array_equal(a, b)


# -- issue 34 -------------------------------------------------------------------------------------
def test_d5_no_set_at_all_raises(problem):
    """D5: an empty Bag or frame raises as fit([]) does (was: the estimator returned unfitted)."""
    _, _, _, rows = problem
    empty = dd.from_pandas(rows.iloc[:0], npartitions=1)
    with dask.config.set(scheduler="sync"):
        for data, kw in [(db.from_sequence([], npartitions=1), {}),
                         (empty, dict(by="sid", y="label", columns=list("abc")))]:
            pipe = _pipe()
            with pytest.raises(ValueError, match="holds no set"):
                sd.fit(pipe, data, classes=[0, 1], **kw)
            assert not hasattr(pipe[0], "anchors_")


def test_d6_label_column_listed_in_columns_raises(problem):
    """D6: the label column may not also be a feature (was silently used as one)."""
    _, _, _, rows = problem
    pipe = _pipe()
    with pytest.raises(ValueError, match="y='label' is the label column and is also listed"):
        sd.fit(pipe, dd.from_pandas(rows, npartitions=2), by="sid", y="label",
               columns=["a", "b", "label"], classes=[0, 1])
    assert not hasattr(pipe[0], "anchors_")


def test_d7_duplicated_id_and_missing_label_are_named(problem):
    """D7: a y Series holding a set id twice names the id (was "y has 16 entries but X holds 15
    sets"); a NaN label names its set, in a Series and in a label column."""
    X, y, ids, rows = problem
    ddf = dd.from_pandas(rows, npartitions=2)
    labels = pd.Series(y, index=ids)
    dup = pd.concat([labels, labels.iloc[[5]]])
    nan = labels.astype(float)
    nan.iloc[7] = np.nan
    col = rows.astype({"label": float})
    col.loc[col["sid"] == "s9", "label"] = np.nan
    with dask.config.set(scheduler="sync"):
        with pytest.raises(ValueError, match="y holds set 's5' 2 times"):
            sd.fit(_pipe(), ddf, by="sid", y=dup, columns=list("abc"), classes=[0, 1])
        with pytest.raises(ValueError, match="y has no value .* for set 's7'"):
            sd.fit(_pipe(), ddf, by="sid", y=nan, columns=list("abc"), classes=[0, 1])
        with pytest.raises(ValueError, match="y has no value .* for set 's9'"):
            sd.fit(_pipe(), dd.from_pandas(col, npartitions=2), by="sid", y="label",
                   columns=list("abc"), classes=[0, 1])


def test_shuffled_transform_reads_each_set_in_index_order(problem):
    """After the shuffle on ``by`` a set's rows are read in the frame's index order, as ``fit``
    reads them: an order-sensitive model (positions) gives the in-memory output (the rows of a
    set cut across partitions came back in the shuffle's order, 2.1 off)."""
    X, y, ids, rows = problem
    otk = OTKEmbedding(n_supports=3, position_sigma=0.3, random_state=0).fit(X)
    with dask.config.set(scheduler="sync"):
        got = sd.transform(otk, dd.from_pandas(rows, npartitions=5), by="sid",
                           columns=list("abc")).compute().loc[ids]
    np.testing.assert_allclose(got.to_numpy(), otk.transform(X), atol=1e-5)


def test_a_fitted_model_fits_again_on_its_columns_by_name(problem):
    """``sd.fit`` on a model fitted on named columns reads those columns by name (a frame of
    another column order was read by position, and its names recorded over the fitted ones)."""
    X, y, ids, rows = problem
    feats = rows[["sid", "a", "b", "c"]]
    with dask.config.set(scheduler="sync"):
        a = sd.fit(OTKEmbedding(n_supports=3, random_state=0), dd.from_pandas(feats, npartitions=1),
                   by="sid", partitioned=True)
        b = copy.deepcopy(a)
        sd.fit(a, dd.from_pandas(feats, npartitions=1), by="sid", partitioned=True)
        sd.fit(b, dd.from_pandas(feats[["sid", "c", "a", "b"]], npartitions=1), by="sid",
               partitioned=True)
    assert list(b.feature_names_in_) == ["a", "b", "c"]
    np.testing.assert_array_equal(a.references_, b.references_)


def test_partitioned_fit_refuses_a_cut_set_before_learning(problem):
    """``partitioned=True`` with a set cut across partitions: the ``ValueError`` comes before
    any step learns (the estimator had learned from the first partition)."""
    X, y, ids, rows = problem
    est = OTKEmbedding(n_supports=3, random_state=0)
    with dask.config.set(scheduler="sync"), pytest.raises(ValueError, match="has rows in partitions"):
        sd.fit(est, dd.from_pandas(rows[["sid", "a", "b", "c"]], npartitions=2), by="sid",
               partitioned=True)
    assert not hasattr(est, "references_")


def test_errors_name_the_set_in_the_stream(problem):
    """A bad set is named by its position in the stream (``iter_transform``), or by its id (a
    Bag of pairs), not by its position in a chunk."""
    X, y, ids, rows = problem
    otk = OTKEmbedding(n_supports=3, random_state=0).fit(X)
    bad = [x.copy() for x in X]
    bad[57][0, 0] = np.nan
    with pytest.raises(ValueError, match=r"set 57 contains NaN"):
        list(skset.utils.iter_transform(otk, bad, chunk_size=10))
    with pytest.raises(ValueError, match=r"set 's57' contains NaN"):
        list(skset.utils.iter_transform(otk, bad, chunk_size=10, ids=ids))
    with dask.config.set(scheduler="sync"), pytest.raises(ValueError, match=r"set 's57' contains"):
        sd.transform(otk, db.from_sequence(list(zip(ids, bad, strict=True)), npartitions=2)).compute()
    # fit names it by its id too (it named the set at its position in the partition: "set 7",
    # another set), from a Bag of pairs and from a frame
    with dask.config.set(scheduler="sync"):
        with pytest.raises(ValueError, match=r"set 's57' contains NaN"):
            sd.fit(OTKEmbedding(n_supports=3, random_state=0),
                   db.from_sequence(list(zip(ids, bad, strict=True)), npartitions=2))
        short = rows[(rows["sid"] != ids[57]) | (rows.groupby("sid").cumcount() < 2)]
        with pytest.raises(ValueError, match=rf"set {ids[57]!r} has 2 elements, fewer than"):
            sd.fit(NystromFeatures(n_components=4, window=3, random_state=0),
                   dd.from_pandas(short, npartitions=1), by="sid", columns=list("abc"))


def test_bag_outputs_write_to_parquet_and_odd_items(problem, tmp_path):
    """A Bag's output (plain arrays, or integer ids) writes to parquet (its index was typed as
    objects: pyarrow refused it); tuple ids stay one index level; ``[id, array]`` lists and
    dicts are refused by name; a missing label of a multi-output triple names its set."""
    pytest.importorskip("pyarrow")
    X, y, ids, rows = problem
    otk = OTKEmbedding(n_supports=3, random_state=0).fit(X)
    with dask.config.set(scheduler="sync"):
        for bag in (db.from_sequence(X, npartitions=2),
                    db.from_sequence(list(enumerate(X)), npartitions=2)):
            path = tmp_path / str(len(list(tmp_path.iterdir())))
            sd.transform(otk, bag).to_parquet(path)
            assert len(pd.read_parquet(path)) == len(X)
        out = sd.transform(otk, db.from_sequence([(("p", i), x) for i, x in enumerate(X[:3])]))
        assert out.compute().index.nlevels == 1
        for item in ([ids[0], X[0]], {"id": ids[0]}):
            with pytest.raises(TypeError, match=f"is a {type(item).__name__}.*tuple"):
                sd.transform(otk, db.from_sequence([item])).compute()
        labels = [np.array([0.0, 1.0]) for _ in range(4)]
        labels[2] = np.array([0.0, np.nan])
        triples = [(ids[i], X[i], labels[i]) for i in range(4)]
        with pytest.raises(ValueError, match="no value.*set 's2'"):
            sd.fit(OTKEmbedding(n_supports=2, random_state=0), db.from_sequence(triples))


def test_label_column_beside_an_index_named_like_by(problem):
    """``y="label"`` on a frame whose index is named like ``by`` (``set_index(by,
    drop=False)``): pandas' ambiguity error before."""
    X, y, ids, rows = problem
    framed = rows.set_index("sid", drop=False)
    with dask.config.set(scheduler="sync"):
        pipe = sd.fit(_pipe(), dd.from_pandas(framed, npartitions=2), by="sid", y="label",
                      columns=list("abc"), classes=[0, 1])
    assert pipe.score(X, y) >= 0.8
