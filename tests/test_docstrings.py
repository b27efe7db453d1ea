"""Every fitted attribute that ``fit`` sets is listed in the "Attributes" section of its class's
docstring, and the docstrings quote no timings or benchmark results (those live in
BENCHMARKS.md)."""

import inspect
import re
import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone
from test_common import ABC, ESTIMATORS, _data, _fit, _instances

import skset
from skset import ABCClusterer, EigengapSpectralClustering


def documented_attributes(cls) -> set[str]:
    """The names listed in the numpydoc "Attributes" section of ``cls.__doc__`` (an entry may
    name several: ``mean_, scale_ : ndarray``)."""
    lines = inspect.cleandoc(cls.__doc__).splitlines()
    names: set[str] = set()
    inside = False
    for i, line in enumerate(lines):
        underline = i + 1 < len(lines) and re.fullmatch(r"-{3,}", lines[i + 1].strip())
        if underline:  # a section header
            inside = line.strip() == "Attributes"
            continue
        if inside and line and not line[0].isspace() and not re.fullmatch(r"-+", line):
            head = line.split(" : ")[0]
            names.update(n.strip() for n in head.split(","))
    return names


def _fitted_attributes(est) -> set[str]:
    return {k for k in vars(est) if k.endswith("_") and not k.startswith("_")}


def _variants():
    """Fitted estimators of every public class, in the configurations that set optional
    attributes (early stopping, several references, the "auto" prior of ABC)."""
    X, y = _data()
    for est in ESTIMATORS:
        yield est, lambda e=est: _fit(e)
        if "early_stopping" in est.get_params():
            es = clone(est).set_params(early_stopping=True, validation_fraction=0.3)
            yield es, lambda e=es: _fit(e)
    Xi, yi = _instances()
    for abc in (ABC, clone(ABC).set_params(input_similarity="auto"),
                clone(ABC).set_params(early_stopping=False, learning_rate_schedule="constant")):
        yield abc, lambda e=abc: clone(e).fit(Xi, yi)
    rng = np.random.default_rng(0)
    yield EigengapSpectralClustering(), lambda: EigengapSpectralClustering(
        random_state=0).fit(np.concatenate([rng.normal(size=(10, 2)),
                                            rng.normal(5, size=(10, 2))]))


VARIANTS = list(_variants())


PUBLIC = [n for n in skset.__all__
          if inspect.isclass(getattr(skset, n)) and issubclass(getattr(skset, n), BaseEstimator)]


def test_every_public_estimator_is_fitted():
    public = set(PUBLIC)
    assert {type(e).__name__ for e, _ in VARIANTS} == public


def test_parser_reads_entries():
    assert {"mean_", "scale_", "module_", "classes_"} <= documented_attributes(
        skset.SetTransformerClassifier)
    assert "n_heads" not in documented_attributes(skset.SetTransformerClassifier)  # a parameter


@pytest.mark.parametrize("est, fit", VARIANTS,
                         ids=[f"{type(e).__name__}{i}" for i, (e, _) in enumerate(VARIANTS)])
def test_fitted_attributes_are_documented(est, fit):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = fit()
    missing = _fitted_attributes(fitted) - documented_attributes(type(fitted))
    assert not missing, f"{type(fitted).__name__} does not document {sorted(missing)}"


# a number with a unit of time, a speed-up, or a score quoted as a result
_FIGURES = re.compile(r"\d\s?(ms|s|min)\b|\d(\.\d+)?x (faster|slower|less|more)\b|"
                      r"\d(\.\d+)?\s?%|accuracy (of )?\d?\.\d|\b(NMI|ARI) (of )?\d\.\d")


@pytest.mark.parametrize("name", PUBLIC)
def test_no_benchmark_figures_in_docstrings(name):
    cls = getattr(skset, name)
    docs = [cls.__doc__] + [m.__doc__ for _, m in inspect.getmembers(cls, callable)
                            if m.__doc__ and (getattr(m, "__module__", None) or "").startswith("skset")]
    for doc in docs:
        found = _FIGURES.search(doc or "")
        assert not found, f"{name}: {found.group(0)!r} in a docstring: see BENCHMARKS.md"


def test_figure_pattern_matches():
    for text in ("took 1.27 s", "3.3x faster", "in 92% of", "NMI 0.734", "12.4 min",
                 "accuracy 0.849", "an accuracy of 0.72"):
        assert _FIGURES.search(text), text
    for text in ("1e-4", "window=10", "0.5 in the paper", "x 3 features",
                 "within the computation's accuracy of 0 after centring"):
        assert not _FIGURES.search(text), text


def test_abc_is_in_the_variants():
    assert any(isinstance(e, ABCClusterer) for e, _ in VARIANTS)
