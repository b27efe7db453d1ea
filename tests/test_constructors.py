"""Every public estimator writes out its own ``__init__`` (scikit-learn's convention, no generated
constructor): it stores its arguments unchanged, is positional only where intended, and its
parameters are exactly the keys of ``_parameter_constraints``, the table ``_check_params`` checks.
"""

import ast
import inspect
import pydoc
import textwrap

import pytest
from sklearn.base import BaseEstimator

import skset
from skset._validation import Allowed, InvalidParameterError

ESTIMATORS = [getattr(skset, name) for name in skset.__all__
              if inspect.isclass(getattr(skset, name))
              and issubclass(getattr(skset, name), BaseEstimator)]

#: the parameters that may be given by position (the first ones); every other is keyword-only
POSITIONAL = {
    "NystromFeatures": ["n_components"],
    "DilatedKernelFeatures": ["n_thresholds", "max_dilations"],
    "OTKEmbedding": ["n_supports", "n_references"],
    "SetTransformerClassifier": ["hidden_size", "n_layers", "n_heads"],
    "SetTransformerRegressor": ["hidden_size", "n_layers", "n_heads"],
    "DeepSetsClassifier": ["hidden_size", "n_layers"],
    "DeepSetsRegressor": ["hidden_size", "n_layers"],
    "OTKClassifier": ["n_components"],
    "OTKRegressor": ["n_components"],
    "ABCClusterer": ["compatibility"],
    "EigengapSpectralClustering": ["n_clusters"],
}

# valid for no parameter of any estimator (scikit-learn's check_param_validation uses the same)
_BadType = type("BadType", (), {})
# a value of a plausible type that is out of range, tried before the bad type
_CANDIDATES = ["bogus", -1, 0, -0.5, 1.5, float("nan"), 2**40, (3, 1)]

ids = [c.__name__ for c in ESTIMATORS]


def test_every_public_estimator_is_listed():
    assert sorted(POSITIONAL) == sorted(ids)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=ids)
def test_table_keys_are_the_parameters(cls):
    params = cls().get_params(deep=False)
    assert set(cls._parameter_constraints) == set(params)
    for name, row in cls._parameter_constraints.items():
        assert isinstance(row, list), f"{cls.__name__}.{name}: a row is a list"
        Allowed(row)  # every entry is a specification, None or a string


@pytest.mark.parametrize("cls", ESTIMATORS, ids=ids)
def test_signature_positional_then_keyword_only(cls):
    sig = inspect.signature(cls.__init__)
    names = list(sig.parameters)
    assert names[0] == "self"
    params = {n: p for n, p in sig.parameters.items() if n != "self"}
    assert set(params) == set(cls().get_params(deep=False))
    positional = [n for n, p in params.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert positional == POSITIONAL[cls.__name__]
    assert names[1:len(positional) + 1] == positional  # first, in that order
    others = {p.kind for n, p in params.items() if n not in positional}
    assert others == {inspect.Parameter.KEYWORD_ONLY}
    assert all(p.default is not p.empty for p in params.values())


@pytest.mark.parametrize("cls", ESTIMATORS, ids=ids)
def test_init_is_written_in_the_class(cls):
    init = cls.__init__
    assert "__init__" in cls.__dict__, f"{cls.__name__} inherits its __init__"
    assert init.__qualname__ == cls.__name__ + ".__init__"
    assert inspect.getsourcefile(init) == inspect.getsourcefile(cls)
    assert init.__module__ == cls.__module__
    # its body only stores each argument, unchanged, under the argument's name
    tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
    body = tree.body[0].body
    stored = []
    for stmt in body:
        assert isinstance(stmt, ast.Assign) and len(stmt.targets) == 1, ast.unparse(stmt)
        target, value = stmt.targets[0], stmt.value
        assert isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
        assert target.value.id == "self" and isinstance(value, ast.Name), ast.unparse(stmt)
        assert target.attr == value.id, ast.unparse(stmt)
        stored.append(target.attr)
    assert stored == [n for n in inspect.signature(init).parameters if n != "self"]


@pytest.mark.parametrize("cls", ESTIMATORS, ids=ids)
def test_help_shows_the_parameters(cls):
    text = pydoc.render_doc(cls, renderer=pydoc.plaintext)
    first = POSITIONAL[cls.__name__][0]
    default = inspect.signature(cls).parameters[first].default
    assert f"__init__(self, {first}={default!r}" in text.replace("\n", "")
    for name in cls._parameter_constraints:
        assert f"{name}=" in text, name


@pytest.mark.parametrize("cls", ESTIMATORS, ids=ids)
def test_defaults_pass_the_check(cls):
    est = cls()
    est._check_params()
    # positional arguments land where the keyword would put them
    values = [getattr(est, n) for n in POSITIONAL[cls.__name__]]
    assert cls(*values).get_params() == est.get_params()


@pytest.mark.parametrize("cls", ESTIMATORS, ids=ids)
def test_bad_value_names_class_and_parameter(cls):
    for name, row in cls._parameter_constraints.items():
        allowed = Allowed(row)
        bad = [v for v in _CANDIDATES if not allowed.accepts(v)] + [_BadType()]
        for value in (bad[0], bad[-1]):
            est = cls(**{name: value})
            with pytest.raises(InvalidParameterError) as err:
                est._check_params()
            msg = str(err.value)
            assert msg.startswith(f"{cls.__name__}: {name}="), msg
            assert "must be" in msg, msg
            assert isinstance(err.value, ValueError) and isinstance(err.value, TypeError)
            assert est.get_params()[name] is value  # the check changes nothing
