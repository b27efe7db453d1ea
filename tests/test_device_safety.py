"""Device safety without a GPU: no tensor may depend on torch's default device.

On a GPU the classic defect is a tensor created without ``device=`` (on the CPU) and mixed with
the data (on CUDA); it also breaks users who call ``torch.set_default_device("cuda")``. Both are
the same fault: code that relies on the default device. Here every estimator fits and predicts
with ``device="cpu"`` while the default device is ``meta`` (tensors without data): a tensor made
without an explicit device lands on ``meta``, and mixing it with the real CPU tensors, or reading
it back, raises. Module construction is explicit too (built on the CPU, then moved).
"""

import warnings

import numpy as np
import pytest
import torch

from skset import NystromFeatures, OTKEmbedding
from skset.cluster import ABCClusterer, EigengapSpectralClustering
from skset.neural_network import (
    DeepSetsClassifier,
    OTKClassifier,
    OTKRegressor,
    SetTransformerClassifier,
    SetTransformerRegressor,
)

pytestmark = pytest.mark.filterwarnings("ignore")


def _sets(seed=0, n=30, d=3):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(int(rng.integers(4, 9)), d)) for _ in range(n)], np.arange(n) % 2


def _instances(seed=0, n=40):
    rng = np.random.default_rng(seed)
    X = [np.vstack([rng.normal(size=(5, 2)), rng.normal(3, size=(5, 2))]) for _ in range(n)]
    return X, [np.r_[np.zeros(5, int), np.ones(5, int)] for _ in range(n)]


CASES = {
    "NystromFeatures": lambda X, y: np.concatenate(NystromFeatures(
        n_components=6, window=2, device="cpu", random_state=0).fit(X, y).transform(X)),
    "OTKEmbedding": lambda X, y: OTKEmbedding(n_supports=3, device="cpu",
                                              random_state=0).fit(X).transform(X),
    "SetTransformerClassifier": lambda X, y: SetTransformerClassifier(
        hidden_size=8, n_heads=2, max_iter=2, early_stopping=True, device="cpu",
        random_state=0).fit(X, y).predict_proba(X),
    "SetTransformerRegressor": lambda X, y: SetTransformerRegressor(
        hidden_size=8, n_heads=2, max_iter=2, device="cpu", random_state=0).fit(
        X, y.astype(float)).predict(X),
    "DeepSetsClassifier": lambda X, y: DeepSetsClassifier(
        max_iter=2, device="cpu", random_state=0).partial_fit(X, y, classes=[0, 1]).predict(X),
    "DeepSetsClassifier(pooled_skip=True)": lambda X, y: DeepSetsClassifier(
        max_iter=2, pooled_skip=True, device="cpu", random_state=0).fit(X, y).predict_proba(X),
    "SetTransformerRegressor(pooled_skip=True)": lambda X, y: SetTransformerRegressor(
        hidden_size=8, n_heads=2, max_iter=2, pooled_skip=True, early_stopping=True,
        device="cpu", random_state=0).fit(X, y.astype(float)).predict(X),
    "OTKClassifier": lambda X, y: OTKClassifier(
        n_components=6, n_supports=3, max_iter=2, early_stopping=True, device="cpu",
        random_state=0).fit(X, y).predict_proba(X),
    "OTKRegressor": lambda X, y: OTKRegressor(
        n_components=6, n_supports=3, max_iter=2, device="cpu", random_state=0).fit(
        X, y.astype(float)).predict(X),
    "ABCClusterer": lambda X, y: ABCClusterer(
        hidden_size=8, n_heads=2, max_steps=4, eval_every=2, batch_size=4, device="cpu",
        random_state=0).fit(*_instances()).predict(_instances(1, 3)[0]),
    "EigengapSpectralClustering": lambda X, y: EigengapSpectralClustering(
        random_state=0).fit_predict(np.vstack(_instances()[0][:2])),
}


@pytest.mark.parametrize("name", list(CASES))
def test_nothing_depends_on_the_default_device(name):
    X, y = _sets()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = np.asarray(CASES[name](X, y))
        with torch.device("meta"):
            got = np.asarray(CASES[name](X, y))
    np.testing.assert_array_equal(got, expected)


def test_the_check_can_fail():
    def careless():  # a tensor made without a device, mixed with the data's
        data = torch.ones(3, device="cpu")
        return (data + torch.zeros(3)).numpy()

    careless()  # fine with the CPU as the default device
    with torch.device("meta"), pytest.raises((RuntimeError, TypeError, NotImplementedError)):
        careless()


@pytest.mark.parametrize("est", [NystromFeatures(), OTKEmbedding(), OTKClassifier(),
                                 SetTransformerClassifier(), DeepSetsClassifier(),
                                 ABCClusterer()],
                         ids=lambda e: type(e).__name__)
def test_non_deterministic_tag_follows_the_device(est, monkeypatch):
    """scikit-learn's ``non_deterministic`` tag: False on the CPU (every fit repeats exactly),
    True where the device resolves to a GPU (fits agree to rounding only); a device this
    machine lacks leaves the tag as on the CPU (the fit names the device)."""
    from sklearn.utils import get_tags

    import skset._base

    assert get_tags(est.set_params(device="cpu")).non_deterministic is False
    monkeypatch.setattr(skset._base, "resolve_device", lambda d: torch.device("cuda"))
    assert get_tags(est.set_params(device="cuda")).non_deterministic is True
    monkeypatch.undo()
    if not torch.cuda.is_available():
        assert get_tags(est.set_params(device="cuda")).non_deterministic is False
    assert get_tags(EigengapSpectralClustering()).non_deterministic is False  # no device: the CPU
