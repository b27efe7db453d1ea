"""Every public parameter of every estimator: one row of ``_parameter_constraints``, a documented
default that matches the signature's, and a bad value rejected at the start of ``fit`` by a
ValueError that names the parameter (the constructors themselves: ``test_constructors.py``)."""

import inspect
import re

import numpy as np
import pytest
from sklearn.base import BaseEstimator

import skset
from skset._base import SksetEstimator
from skset._validation import Allowed, InvalidParameterError, check_params

ESTIMATORS = [getattr(skset, name) for name in skset.__all__
              if inspect.isclass(getattr(skset, name))
              and issubclass(getattr(skset, name), BaseEstimator)]

# candidates for a bad value, the most telling first; each parameter gets the first its row rejects
_CANDIDATES = ["bogus", -1, 0, 0.5, -0.5, 1.5, float("nan"), float("inf"), 2**40, (3, 1),
               object()]


def _fit_data(cls):
    rng = np.random.default_rng(0)
    if cls is skset.EigengapSpectralClustering:
        return rng.normal(size=(12, 2)), None
    X = [rng.normal(size=(6, 2)) for _ in range(8)]
    if cls is skset.ABCClusterer:
        return X, [np.arange(6) % 2 for _ in X]
    return X, np.arange(8) % 2


def _bad_values(constraints: list):
    allowed = Allowed(constraints)
    return [v for v in _CANDIDATES if not allowed.accepts(v)]


def test_every_estimator_has_a_table():
    assert len(ESTIMATORS) == 11
    for cls in ESTIMATORS:
        assert issubclass(cls, SksetEstimator), cls
        assert list(cls._parameter_constraints) == list(inspect.signature(cls).parameters), cls


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_defaults_are_valid_and_documented(cls):
    est = cls()
    check_params(est)
    doc = inspect.getdoc(cls)
    for name, param in inspect.signature(cls).parameters.items():
        # numpydoc: "name : type, default=value" (or "a, b : ..., default=x, y" for pairs)
        m = re.search(rf"^\s*(?:\w+, )*{name}(?:, \w+)* : [^\n]*default=([^\n]+)$", doc, re.M)
        assert m, f"{cls.__name__}.{name} is not documented with its default"
        shown = m.group(1).strip()
        names = re.match(r"^\s*([\w, ]+) :", m.group(0)).group(1).split(", ")
        if len(names) > 1:  # "tol, n_iter_no_change : float, int, default=1e-4, 10"
            shown = shown.split(", ")[names.index(name)] if shown.count(",") else shown
        default = param.default
        ok = {repr(default), str(default), f'"{default}"', f"{default:_}"
              if isinstance(default, int) and not isinstance(default, bool) else repr(default),
              f"{default:g}" if isinstance(default, float) else repr(default),
              f"{default:.0e}".replace("e-0", "e-") if isinstance(default, float) else repr(default)}
        if isinstance(default, tuple):
            ok.add(str(default).replace(" ", ""))
            ok.add(str(default))
        assert shown in ok or shown.replace(" ", "") in ok or shown.startswith(tuple(ok)), (
            f"{cls.__name__}.{name}: docstring says default={shown}, the signature {default!r}")


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_every_parameter_rejects_a_bad_value_naming_it(cls):
    X, y = _fit_data(cls)
    for name, constraints in cls._parameter_constraints.items():
        bad = _bad_values(constraints)
        assert bad, f"{cls.__name__}.{name} accepts every candidate value"
        est = cls(**{name: bad[0]})
        with pytest.raises(ValueError, match=rf"{cls.__name__}: {name}=") as err:
            est.fit(X, y)
        assert isinstance(err.value, InvalidParameterError)
        assert isinstance(err.value, TypeError)  # scikit-learn's convention too
        # set_params then fit is checked the same way, and the estimator is not changed
        est = cls().set_params(**{name: bad[-1]})
        with pytest.raises(ValueError, match=name):
            est.fit(X, y)
        assert est.get_params()[name] is bad[-1]


def test_relations_between_parameters():
    X, y = _fit_data(skset.SetTransformerClassifier)
    with pytest.raises(ValueError, match="hidden_size=10 must be divisible by n_heads=4"):
        skset.SetTransformerClassifier(hidden_size=10).fit(X, y)
    X, y = _fit_data(skset.ABCClusterer)
    with pytest.raises(ValueError, match="hidden_size=10 must be divisible by n_heads=4"):
        skset.ABCClusterer(hidden_size=10).fit(X, y)


def test_init_positional_then_keyword_only():
    sig = inspect.signature(skset.SetTransformerClassifier)
    kinds = [p.kind for p in sig.parameters.values()]
    assert kinds[:3] == [inspect.Parameter.POSITIONAL_OR_KEYWORD] * 3
    assert set(kinds[3:]) == {inspect.Parameter.KEYWORD_ONLY}
    est = skset.SetTransformerClassifier(32, 1, 2, norm="set")
    assert (est.hidden_size, est.n_layers, est.n_heads, est.norm) == (32, 1, 2, "set")
    with pytest.raises(TypeError):
        skset.SetTransformerClassifier(32, 1, 2, 16)  # n_inducing is keyword-only
    with pytest.raises(TypeError):
        skset.SetTransformerClassifier(no_such_parameter=1)
    assert repr(est) == "SetTransformerClassifier(hidden_size=32, n_heads=2, n_layers=1, norm='set')"


def test_renamed_parameters_load_under_their_new_names():
    import pickle

    est = skset.ABCClusterer(hidden_size=16, n_heads=2)
    state = est.__dict__.copy()
    state["dim"] = state.pop("hidden_size")  # as pickled before the rename
    old = skset.ABCClusterer.__new__(skset.ABCClusterer)
    old.__setstate__(state)
    assert old.get_params()["hidden_size"] == 16
    # a parameter added since (the prior) takes the value the old model had: none
    state.pop("input_similarity")
    older = skset.ABCClusterer.__new__(skset.ABCClusterer)
    older.__setstate__(state)
    assert older.input_similarity is None and skset.ABCClusterer().input_similarity == "auto"
    assert pickle.loads(pickle.dumps(old)).hidden_size == 16
    emb = skset.OTKEmbedding.__new__(skset.OTKEmbedding)
    st = skset.OTKEmbedding().__dict__.copy()
    st["max_iter"] = st.pop("barycenter_iter")
    emb.__setstate__(st)
    assert emb.barycenter_iter == 10
