"""Scaling out: GridSearchCV over an OTK pipeline on a dask.distributed cluster (and Ray's joblib
backend where Ray is installed); results equal the sequential search, worker threads are limited."""

import joblib
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline

from skset import NystromFeatures, OTKEmbedding

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _problem():
    rng = np.random.default_rng(0)
    X = [rng.normal(loc=0.8 * (i % 2), size=(int(rng.integers(4, 12)), 3)) for i in range(40)]
    return X, np.arange(40) % 2


def _search():
    pipe = Pipeline([
        ("nystrom", NystromFeatures(n_components=8, random_state=0, device="cpu")),
        ("otk", OTKEmbedding(n_supports=3, random_state=0, device="cpu")),
        ("clf", LogisticRegression(max_iter=200)),
    ])
    grid = {"otk__n_supports": [2, 4], "otk__epsilon": [0.1, 1.0]}
    return GridSearchCV(pipe, grid, cv=2, n_jobs=2)


def _compare(search, reference):
    assert search.best_params_ == reference.best_params_
    np.testing.assert_allclose(search.cv_results_["mean_test_score"],
                               reference.cv_results_["mean_test_score"])


@pytest.fixture(scope="module")
def sequential():
    X, y = _problem()
    with joblib.parallel_config(backend="sequential"):
        return _search().fit(X, y)


def _worker_threads():
    import torch

    return torch.get_num_threads()


def test_grid_search_on_a_dask_cluster(sequential):
    distributed = pytest.importorskip("dask.distributed")
    X, y = _problem()
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None)
    try:
        with distributed.Client(cluster) as client:
            # worker processes start with OMP_NUM_THREADS=1 (the nanny's pre-spawn-environ),
            # which torch honours: no oversubscription
            assert set(client.run(_worker_threads).values()) == {1}
            with joblib.parallel_config(backend="dask"):
                search = _search().fit(X, y)
    finally:
        cluster.close()
    assert cluster.status.name == "closed"
    _compare(search, sequential)
    assert search.best_estimator_.predict(X).shape == (40,)


def test_grid_search_with_ray(sequential):
    ray = pytest.importorskip("ray")
    from ray.util.joblib import register_ray

    X, y = _problem()
    register_ray()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with joblib.parallel_config(backend="ray"):
            search = _search().fit(X, y)
    finally:
        ray.shutdown()
    _compare(search, sequential)

