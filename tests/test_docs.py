"""The documentation covers the public API: every public name is in docs/api.rst, every public
estimator's docstring has the numpydoc sections the docs promise, and the gallery's stored model
loads."""

import inspect
import re
from pathlib import Path

import numpy as np
import pytest
from numpydoc.docscrape import ClassDoc
from sklearn.base import BaseEstimator

import skset
import skset.cluster
import skset.datasets
import skset.distributed
import skset.nn
import skset.ot
import skset.utils

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api.rst"
MODULES = [skset, skset.nn, skset.datasets, skset.cluster, skset.ot, skset.utils,
           skset.distributed]


def _documented():
    """(module, name) pairs listed in autosummary blocks of docs/api.rst."""
    out, module = set(), None
    in_summary = False
    for line in API.read_text().splitlines():
        m = re.match(r"\.\. currentmodule:: (\S+)", line)
        if m:
            module = m.group(1)
            continue
        if line.startswith(".. autosummary::"):
            in_summary = True
            continue
        if in_summary:
            if not line.strip() or line.strip().startswith(":"):
                continue
            if not line.startswith("   "):
                in_summary = False
                continue
            out.add((module, line.strip()))
    return out


def _public(module):
    return [n for n in module.__all__ if not n.startswith("_")]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_every_public_name_is_in_the_api_reference(module):
    documented = _documented()
    # names re-exported by skset (the estimators of skset.cluster) are documented under skset
    missing = [n for n in _public(module)
               if (module.__name__, n) not in documented
               and not (n in skset.__all__ and ("skset", n) in documented)]
    assert not missing, f"{module.__name__}: not in docs/api.rst: {missing}"


def test_api_reference_lists_only_existing_names():
    import importlib

    for module, name in _documented():
        assert hasattr(importlib.import_module(module), name), f"{module}.{name} does not exist"


ESTIMATORS = [getattr(skset, n) for n in skset.__all__
              if inspect.isclass(getattr(skset, n)) and issubclass(getattr(skset, n), BaseEstimator)]


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_estimator_docstring_sections(cls):
    doc = ClassDoc(cls, config={"show_class_members": False})
    for section in ("Parameters", "Attributes", "See Also", "References", "Examples"):
        assert doc[section], f"{cls.__name__} has no {section} section"
    assert ">>>" in "\n".join(doc["Examples"]), f"{cls.__name__}: Examples has no doctest"
    documented = {n.strip() for p in doc["Parameters"] for n in p.name.split(",")}  # "a, b : ..."
    params = set(inspect.signature(cls).parameters)
    assert params <= documented, f"{cls.__name__}: undocumented parameters {params - documented}"


def test_gallery_abc_model_loads_and_clusters():
    """examples/plot_abc_circles.py loads this file: it must load with this skset version.

    After a version bump, re-save it:
    ``python -c "import skset; p='examples/data/abc_circles_20k.skset';
    skset.save(skset.load(p, strict_version=False), p)"``.
    """
    from sklearn.metrics import adjusted_rand_score

    from skset.datasets import make_circles_instances

    path = ROOT / "examples" / "data" / "abc_circles_20k.skset"
    assert path.stat().st_size < 3 * 2**20
    model = skset.load(path)
    assert isinstance(model, skset.ABCClusterer) and model.n_iter_ == 20000
    assert model._optimizer_state is None  # stripped: prediction does not need it
    X, y = make_circles_instances(8, 100, random_state=7)
    labels = model.predict(X, n_clusters=4)
    ari = np.mean([adjusted_rand_score(t, p) for t, p in zip(y, labels)])
    assert ari > 0.6, ari
