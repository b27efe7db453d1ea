"""skset.distributed: a fitted estimator applied to sets stored in a dask DataFrame (long format,
sets straddling partitions) or a dask Bag; results equal the estimator on the sets in memory."""

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

from skset import NystromFeatures, OTKEmbedding

dask = pytest.importorskip("dask")
dd = pytest.importorskip("dask.dataframe")
db = pytest.importorskip("dask.bag")
sd = pytest.importorskip("skset.distributed")

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    X = [rng.normal(loc=i % 2, size=(int(rng.integers(3, 9)), 3)) for i in range(60)]
    y = np.arange(60) % 2
    pipe = make_pipeline(NystromFeatures(n_components=8, random_state=0),
                         OTKEmbedding(n_supports=3, random_state=0),
                         LogisticRegression()).fit(X, y)
    ids = [f"s{i}" for i in range(60)]
    rows = pd.DataFrame(np.concatenate(X), columns=list("abc"))
    rows["sid"] = np.repeat(ids, [len(s) for s in X])
    rows["t"] = np.concatenate([np.arange(len(s)) for s in X])
    return X, y, pipe, ids, rows


def test_frame_with_sets_across_partitions(problem):
    X, _, pipe, ids, rows = problem
    shuffled = rows.sample(frac=1.0, random_state=0)  # every set cut over the 4 partitions
    ddf = dd.from_pandas(shuffled, npartitions=4)
    with dask.config.set(scheduler="sync"):
        proba = sd.transform(pipe, ddf, by="sid", columns=list("abc"), order_by="t",
                             method="predict_proba").compute()
        pred = sd.transform(pipe, ddf, by="sid", columns=list("abc"), order_by="t",
                            method="predict").compute()
    assert sorted(proba.index) == sorted(ids) and list(proba.columns) == ["proba_0", "proba_1"]
    np.testing.assert_allclose(proba.loc[ids].to_numpy(), pipe.predict_proba(X), atol=1e-6)
    np.testing.assert_array_equal(pred.loc[ids, "prediction"].to_numpy(), pipe.predict(X))


def test_frame_partitioned_by_set_skips_the_shuffle(problem):
    X, _, pipe, ids, rows = problem
    ddf = dd.from_pandas(rows, npartitions=1).repartition(npartitions=1)
    emb = pipe[:2]
    with dask.config.set(scheduler="sync"):
        lazy = sd.transform(emb, ddf, by="sid", columns=list("abc"), order_by="t",
                            partitioned=True)
        out = lazy.compute()
    np.testing.assert_allclose(out.loc[ids].to_numpy(), emb.transform(X), rtol=1e-5, atol=1e-6)
    assert list(out.columns) == [str(n) for n in emb.get_feature_names_out()]


def test_estimator_is_one_key_of_the_graph(problem):
    _, _, pipe, _, rows = problem
    ddf = dd.from_pandas(rows.sample(frac=1.0, random_state=1), npartitions=6)
    lazy = sd.transform(pipe, ddf, by="sid", columns=list("abc"), method="predict")
    graph = dict(lazy.__dask_graph__())
    copies = [k for k, v in graph.items() if type(v).__name__ == "Pipeline"
              or type(getattr(v, "value", None)).__name__ == "Pipeline"]
    assert len(copies) == 1, copies  # sent once, shared by the partitions' tasks


def test_bag_of_arrays_and_of_pairs(problem):
    X, _, pipe, ids, _ = problem
    emb = pipe[:2]
    with dask.config.set(scheduler="sync"):
        pairs = sd.transform(emb, db.from_sequence(list(zip(ids, X)), npartitions=3)).compute()
        plain = sd.transform(emb, db.from_sequence(X, npartitions=3)).compute()
    ref = emb.transform(X)
    np.testing.assert_allclose(pairs.loc[ids].to_numpy(), ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(plain.sort_index().to_numpy(), ref, rtol=1e-5, atol=1e-6)


def test_on_a_local_cluster_to_parquet(problem, tmp_path):
    pytest.importorskip("distributed")
    pytest.importorskip("pyarrow")
    from distributed import Client, LocalCluster

    X, _, pipe, ids, rows = problem
    ddf = dd.from_pandas(rows.sample(frac=1.0, random_state=2), npartitions=4)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster):
        sd.transform(pipe, ddf, by="sid", columns=list("abc"), order_by="t",
                     method="predict_proba").to_parquet(tmp_path / "out")
    back = pd.read_parquet(tmp_path / "out")
    np.testing.assert_allclose(back.loc[ids].to_numpy(), pipe.predict_proba(X), atol=1e-6)


def test_bad_input(problem):
    _, _, pipe, _, rows = problem
    ddf = dd.from_pandas(rows, npartitions=2)
    with pytest.raises(ValueError, match="by="):
        sd.transform(pipe, ddf, method="predict")
    with pytest.raises(ValueError, match="not a column"):
        sd.transform(pipe, ddf, by="nope", method="predict")
    with pytest.raises(TypeError, match="no transform"):
        sd.transform(pipe, ddf, by="sid")
    with pytest.raises(ValueError, match="method"):
        sd.transform(pipe, ddf, by="sid", method="fit")
    with pytest.raises(TypeError, match="maps elements"):
        sd.transform(pipe[0], ddf, by="sid")
    with pytest.raises(TypeError, match="dask DataFrame or Bag"):
        sd.transform(pipe, rows, by="sid", method="predict")
    with pytest.raises(Exception, match="not fitted|NotFitted"):
        sd.transform(OTKEmbedding(), ddf, by="sid")


def test_worker_allocator_sets_the_nannies_environment(monkeypatch):
    import os

    # a nanny reads this process's environment before its configuration, and a cluster started
    # earlier in the process leaves dask's values there
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    pytest.importorskip("distributed")  # defines the nanny's configuration
    key = "distributed.nanny.pre-spawn-environ"
    before = dict(dask.config.get(key))
    with sd.worker_allocator(MALLOC_TRIM_THRESHOLD_=None, MALLOC_ARENA_MAX=2):
        env = dask.config.get(key)
        assert env["MALLOC_ARENA_MAX"] == "2"
        assert env["MALLOC_MMAP_THRESHOLD_"] == sd.WORKER_ALLOCATOR["MALLOC_MMAP_THRESHOLD_"]
        assert os.environ["MALLOC_ARENA_MAX"] == "2"
        # None leaves dask's own value
        assert env.get("MALLOC_TRIM_THRESHOLD_") == before.get("MALLOC_TRIM_THRESHOLD_")
        assert os.environ["MALLOC_TRIM_THRESHOLD_"] == "65536"
    with sd.worker_allocator():
        assert os.environ["MALLOC_TRIM_THRESHOLD_"] == sd.WORKER_ALLOCATOR["MALLOC_TRIM_THRESHOLD_"]
    assert os.environ["MALLOC_TRIM_THRESHOLD_"] == "65536"
    assert dict(dask.config.get(key)) == before  # the context manager restores it
    assert "MALLOC_ARENA_MAX" not in os.environ or os.environ["MALLOC_ARENA_MAX"] != "2"
    with pytest.raises(TypeError, match="MALLOC_ARENA_MAX must be"):
        sd.worker_allocator(MALLOC_ARENA_MAX=1.5)
    environ = dict(os.environ)
    for name in ("A=B", "", "A\x00B"):  # refused before any variable is set
        with pytest.raises(ValueError, match="cannot name an environment variable"):
            sd.worker_allocator(**{name: "1"})
        assert dict(os.environ) == environ


def test_worker_allocator_reaches_worker_processes(monkeypatch):
    pytest.importorskip("distributed")
    import os

    # what an earlier cluster of the same process leaves behind (dask's nanny writes its
    # variables into this process's environment): worker_allocator must win over it
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    from distributed import Client, LocalCluster

    with sd.worker_allocator(), LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                              dashboard_address=None) as cluster, \
            Client(cluster) as client:
        env = client.run(lambda: {k: os.environ.get(k) for k in sd.WORKER_ALLOCATOR})
    assert list(env.values()) == [sd.WORKER_ALLOCATOR]


def _frame_part(i, rows, groups, marker=None):
    """Partition ``i`` of a from_map frame: the rows of the sets in ``groups[i]``; with
    ``marker`` (a path), partition 0 kills its worker process the first time it runs."""
    import os

    if marker is not None and i == 0 and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)  # the worker process dies mid-computation; dask reruns its tasks
    return rows[rows["sid"].isin(groups[i])]


def test_on_two_worker_processes_equals_memory(problem, tmp_path):
    """On a LocalCluster of 2 worker processes, with partitions that cut sets: a pipeline's
    predict_proba, OTKEmbedding's transform and a supervised estimator's predict_proba equal the
    estimators on the sets in memory (1e-5), ids kept; a worker killed mid-computation changes
    nothing (dask reruns its tasks)."""
    pytest.importorskip("distributed")
    import os

    from distributed import Client, LocalCluster

    from skset.neural_network import OTKClassifier

    X, y, pipe, ids, rows = problem
    emb = pipe[:2]
    clf = OTKClassifier(n_components=8, n_supports=3, max_iter=3, random_state=0).fit(X, y)
    cut = dd.from_pandas(rows.sample(frac=1.0, random_state=3), npartitions=4)
    groups = np.array_split(np.array(ids), 3)
    marker = str(tmp_path / "killed")
    with sd.worker_allocator(), LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                              dashboard_address=None) as cluster, \
            Client(cluster) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        common = dict(by="sid", columns=list("abc"), order_by="t")
        proba = sd.transform(pipe, cut, method="predict_proba", **common).compute()
        out = sd.transform(emb, cut, **common).compute()
        sup = sd.transform(clf, cut, method="predict_proba", **common).compute()
        # partition 0 kills its worker the first time: the nanny restarts it, the task reruns
        pids = set(client.run(os.getpid).values())
        frame = dd.from_map(_frame_part, range(3), rows=rows, groups=groups, marker=marker)
        again = sd.transform(pipe, frame, method="predict_proba", partitioned=True,
                             **common).compute()
        # the killed process is gone (its nanny restarts it, or, when the worker's broken
        # scheduler connection is seen first, closes: distributed races there; the results
        # above are what this test is about)
        client.wait_for_workers(1, timeout=60)
        assert set(client.run(os.getpid).values()) != pids
    for got in (proba, out, sup, again):
        assert sorted(got.index) == sorted(ids)
    np.testing.assert_allclose(proba.loc[ids].to_numpy(), pipe.predict_proba(X), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(out.loc[ids].to_numpy(), emb.transform(X), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sup.loc[ids].to_numpy(), clf.predict_proba(X), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(again.loc[ids].to_numpy(), proba.loc[ids].to_numpy(), rtol=1e-5,
                               atol=1e-5)


def test_nan_ids_empty_partitions_and_mismatched_columns(problem):
    X, _, pipe, ids, rows = problem
    common = dict(by="sid", order_by="t", method="predict_proba")
    with dask.config.set(scheduler="sync"):
        # a set id with NaN: a clear error, whether or not the frame is shuffled
        bad = rows.astype({"sid": object})
        bad.loc[5, "sid"] = np.nan
        for partitioned in (False, True):
            with pytest.raises(ValueError, match="missing values"):
                # (one partition when partitioned: two would cut a set, a different error)
                sd.transform(pipe, dd.from_pandas(bad, npartitions=1 if partitioned else 2),
                             partitioned=partitioned,
                             columns=list("abc"), **common).compute()
        # an empty partition: no rows out of it, the rest as in memory
        groups = [np.array(ids[:30]), np.array([], dtype=object), np.array(ids[30:])]
        frame = dd.from_map(_frame_part, range(3), rows=rows, groups=groups)
        out = sd.transform(pipe, frame, partitioned=True, columns=list("abc"), **common).compute()
        np.testing.assert_allclose(out.loc[ids].to_numpy(), pipe.predict_proba(X), atol=1e-6)
        # one set's rows in two partitions with different columns: partition 1 lacks "c"
        first, second = rows.iloc[:4], rows.iloc[4:].drop(columns="c")
        mixed = dd.from_map(lambda i: [first, second][i], range(2), enforce_metadata=False)
        with pytest.raises(ValueError, match="set 's0' has NaN in column 'c'"):
            sd.transform(pipe, mixed, **common).compute()


# -- issue 34: the output schema is the estimator's own output; bad Bags, NaN rows, straddling sets
def _frame(X, ids):
    rows = pd.DataFrame(np.concatenate(X), columns=list("abc"))
    rows["sid"] = np.repeat(ids, [len(s) for s in X])
    return dd.from_pandas(rows.sample(frac=1.0, random_state=3), npartitions=3)


def test_d1_binary_decision_function_is_one_column(problem):
    """D1: a binary scikit-learn classifier's decision_function is (n,): one column, not one per
    class (was a pandas shape error at compute)."""
    X, _, pipe, ids, _ = problem
    with dask.config.set(scheduler="sync"):
        out = sd.transform(pipe, _frame(X, ids), by="sid", method="decision_function").compute()
    assert list(out.columns) == ["decision"]
    np.testing.assert_allclose(out.loc[ids, "decision"].to_numpy(), pipe.decision_function(X),
                               atol=1e-6)


@pytest.mark.parametrize("which", ["ridge", "otk_regressor"])
def test_d2_multi_output_regression_through_a_pipeline(problem, which):
    """D2: two regression targets through a Pipeline (which has no y_mean_): two prediction
    columns equal to predict in memory."""
    from sklearn.linear_model import Ridge

    from skset.neural_network import OTKRegressor

    X, y, _, ids, _ = problem
    Y = np.stack([y + np.array([x.mean() for x in X]), -2.0 * y], 1)
    final = (Ridge(),) if which == "ridge" else ()
    pipe = make_pipeline(*((OTKEmbedding(n_supports=3, random_state=0),) + final) if final else
                         (OTKRegressor(n_components=8, n_supports=3, max_iter=2, random_state=0,
                                       device="cpu"),)).fit(X, Y)
    with dask.config.set(scheduler="sync"):
        out = sd.transform(pipe, _frame(X, ids), by="sid", method="predict").compute()
    assert list(out.columns) == ["prediction_0", "prediction_1"]
    np.testing.assert_allclose(out.loc[ids].to_numpy(), pipe.predict(X), rtol=1e-5, atol=1e-5)


def test_d3_float64_output_stays_float64(problem):
    """D3: a float64 model's transform, predict and decision_function stay float64, equal to the
    in-memory result to 1e-10 (were cast to float32, 1e-7 off)."""
    X, y, _, ids, _ = problem
    pipe = make_pipeline(OTKEmbedding(n_supports=3, dtype="float64", random_state=0,
                                      device="cpu"), LogisticRegression()).fit(X, y)
    with dask.config.set(scheduler="sync"):
        emb = sd.transform(pipe[:1], _frame(X, ids), by="sid").compute()
        dec = sd.transform(pipe, _frame(X, ids), by="sid", method="decision_function").compute()
    assert set(emb.dtypes) == {np.dtype("float64")} and set(dec.dtypes) == {np.dtype("float64")}
    np.testing.assert_allclose(emb.loc[ids].to_numpy(), pipe[:1].transform(X), rtol=1e-10,
                               atol=1e-10)
    np.testing.assert_allclose(dec.loc[ids].to_numpy()[:, 0], pipe.decision_function(X),
                               rtol=1e-10, atol=1e-10)


def test_multi_label_pipeline_predict_and_predict_proba(problem):
    """A 2-D predict (multi-label, MultiOutputClassifier) is one column per label; its list of
    predict_proba arrays one column per (label, class)."""
    from sklearn.multioutput import MultiOutputClassifier

    X, y, _, ids, _ = problem
    Y = np.stack([y, (np.arange(len(y)) // 2) % 2, 1 - y], 1)
    pipe = make_pipeline(OTKEmbedding(n_supports=3, random_state=0, device="cpu"),
                         MultiOutputClassifier(LogisticRegression())).fit(X, Y)
    with dask.config.set(scheduler="sync"):
        pred = sd.transform(pipe, _frame(X, ids), by="sid", method="predict").compute()
        proba = sd.transform(pipe, _frame(X, ids), by="sid", method="predict_proba").compute()
    assert list(pred.columns) == ["prediction_0", "prediction_1", "prediction_2"]
    np.testing.assert_array_equal(pred.loc[ids].to_numpy(), pipe.predict(X))
    assert list(proba.columns) == [f"proba_{j}_{c}" for j in range(3) for c in (0, 1)]
    np.testing.assert_allclose(proba.loc[ids].to_numpy(), np.hstack(pipe.predict_proba(X)),
                               atol=1e-6)


def test_d4_bag_items_of_mixed_kinds_are_named(problem):
    """D4: a Bag partition mixing (id, array) pairs and arrays, or holding (id, array, label)
    triples, gives a TypeError naming the item and the rule (was numpy's inhomogeneous-shape
    error)."""
    X, _, pipe, ids, _ = problem
    emb = pipe[:2]
    mixed = [(ids[0], X[0]), X[1], (ids[2], X[2])]
    triples = [(i, x, 0) for i, x in zip(ids[:3], X[:3])]
    with dask.config.set(scheduler="sync"):
        with pytest.raises(TypeError, match=r"item 1 of partition 0 .*\(id, array\) pair"):
            sd.transform(emb, db.from_sequence(mixed, npartitions=1)).compute()
        with pytest.raises(TypeError, match=r"item 0 of partition 0 is a tuple of 3.*labels "
                                            r"are for fit"):
            sd.transform(emb, db.from_sequence(triples, npartitions=1)).compute()


def test_d12_nan_row_named_by_its_index_label(problem):
    """D12: a NaN feature names its row by the frame's index label, the same message as in
    memory (was the row's position inside the shuffled partition)."""
    from skset import sets_from_frame

    X, _, pipe, ids, rows = problem
    bad = rows.copy()
    bad.loc[37, "b"] = np.nan
    with pytest.raises(ValueError) as memory:
        sets_from_frame(bad, by="sid", columns=list("abc"))
    assert "index 37 of the frame" in str(memory.value)
    with dask.config.set(scheduler="sync"), pytest.raises(ValueError) as dist:
        sd.transform(pipe, dd.from_pandas(bad.sample(frac=1.0, random_state=0), npartitions=3),
                     by="sid", columns=list("abc"), method="predict").compute()
    assert str(dist.value) == str(memory.value)


def test_partitioned_frame_with_a_straddling_set_raises(problem):
    """partitioned=True on a frame whose sets straddle partitions: a ValueError naming a set
    (was duplicated ids in the result, silently)."""
    X, _, pipe, ids, rows = problem
    ddf = dd.from_pandas(rows.sample(frac=1.0, random_state=0), npartitions=4)
    with dask.config.set(scheduler="sync"), pytest.raises(
            ValueError, match=r"partitioned=True, but set 's\d+' has rows in partitions"):
        sd.transform(pipe, ddf, by="sid", columns=list("abc"), method="predict",
                     partitioned=True).compute()
    # and fit, which cut such a set into two sets of one id and trained on both
    from skset import OTKEmbedding

    with dask.config.set(scheduler="sync"), pytest.raises(
            ValueError, match=r"partitioned=True, but set 's\d+' has rows in partitions \d+ and \d+"):
        sd.fit(OTKEmbedding(n_supports=2, random_state=0), ddf, by="sid",
               columns=list("abc"), partitioned=True)


@pytest.mark.parametrize("labels", ["int", "str"])
def test_d13_user_guide_recipe_fit_then_transform_on_the_same_frame(labels):
    """D13: sd.fit(..., y="label") then sd.transform(...) on the same frame: transform reads the
    columns fit used (recorded as feature_names_in_), not the label column; a frame without
    them is refused by name."""
    from sklearn.linear_model import SGDClassifier

    rng = np.random.default_rng(4)
    n = 40
    y = np.arange(n) % 2 if labels == "int" else np.where(np.arange(n) % 2, "sick", "well")
    X = [rng.normal(loc=1.5 * (i % 2), size=(int(rng.integers(3, 8)), 3)) for i in range(n)]
    ids = [f"p{i}" for i in range(n)]
    cells = pd.DataFrame(np.concatenate(X), columns=["cd4", "cd8", "cd19"])
    cells["sample"] = np.repeat(ids, [len(s) for s in X])
    cells["label"] = np.repeat(y, [len(s) for s in X])
    ddf = dd.from_pandas(cells, npartitions=2)
    pipe = make_pipeline(NystromFeatures(n_components=8, random_state=0),
                         OTKEmbedding(n_supports=3, random_state=0),
                         SGDClassifier(loss="log_loss", random_state=0))
    with dask.config.set(scheduler="sync"):
        sd.fit(pipe, ddf, by="sample", y="label", classes=np.unique(y))
        assert list(pipe[0].feature_names_in_) == ["cd4", "cd8", "cd19"]
        out = sd.transform(pipe, ddf, by="sample", method="predict_proba").compute()
        np.testing.assert_allclose(out.loc[ids].to_numpy(), pipe.predict_proba(X), atol=1e-6)
        with pytest.raises(ValueError, match=r"fitted on the feature columns .*no column\(s\) "
                                             r"\['cd19'\]"):
            sd.transform(pipe, ddf.drop(columns="cd19"), by="sample", method="predict")
