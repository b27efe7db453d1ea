"""The engine (``skset.nn``, ``skset.ot``, ``skset._sets``, ``skset._stats``...) depends on no estimator.

The estimators build on the engine, never the other way round: no engine module imports
scikit-learn or one of skset's estimator modules, at module level or inside a function. Within
the engine, the OT package ``skset/ot/`` is the bottom: it imports no other skset module (no
``skset._config`` either: its callers pass the compiled-or-eager choice); the layers of
``skset/nn/`` import neither numpy nor ``skset._config`` (they take arguments; the estimators read
the settings). The check parses the sources (nothing is imported), resolving relative imports.
"""

import ast
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "skset"
OT_FILES = sorted((PACKAGE_DIR / "ot").glob("*.py"))
NN_FILES = sorted((PACKAGE_DIR / "nn").glob("*.py"))
ENGINE_FILES = sorted([*NN_FILES, *OT_FILES,
                       PACKAGE_DIR / "_sets.py", PACKAGE_DIR / "_weighting.py", PACKAGE_DIR / "_stats.py",
                       PACKAGE_DIR / "_serving.py",
                       PACKAGE_DIR / "_config.py", PACKAGE_DIR / "_threads.py"])
FORBIDDEN = (
    "sklearn",
    "skset.embedding",
    "skset.kernel_approximation",
    "skset.cluster",
    "skset.neural_network",
    "skset._persist",
    "skset.utils",
    "skset.datasets",
)


def _module_name(path: Path, package_dir: Path) -> str:
    parts = path.relative_to(package_dir.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(path: Path, package_dir: Path = PACKAGE_DIR) -> list[tuple[int, str]]:
    """``(line, module)`` for every module an import statement of ``path`` may load.

    ``from pkg import name`` yields ``pkg`` and ``pkg.name`` (``name`` may be a submodule).
    """
    module = _module_name(path, package_dir)
    # the package that relative imports start from
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                if node.level - 1 >= len(parts):
                    raise AssertionError(f"{path}:{node.lineno}: relative import beyond the top")
                base = ".".join(parts[: len(parts) - (node.level - 1)])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names
                      if alias.name != "*"]
    return found


def _is_forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


def test_engine_files_found():
    names = {p.name for p in ENGINE_FILES}
    assert {"__init__.py", "nystrom.py", "otk.py", "_sinkhorn.py", "_compiled.py", "_common.py",
            "_sets.py"} <= names


def _outside_ot(name: str) -> bool:
    """An import that leaves the OT package: any skset module but ``skset.ot`` and its modules."""
    return (name == "skset" or name.startswith("skset.")) and not (
        name == "skset.ot" or name.startswith("skset.ot."))


def _nn_forbidden(name: str) -> bool:
    """What a layer of ``skset/nn/`` may not import: numpy and the process-wide settings."""
    return any(name == f or name.startswith(f + ".") for f in ("numpy", "skset._config"))


@pytest.mark.parametrize("path", OT_FILES, ids=lambda p: str(p.relative_to(PACKAGE_DIR)))
def test_ot_package_imports_nothing_above_it(path):
    bad = [f"line {line}: {name}" for line, name in _imported_modules(path) if _outside_ot(name)]
    assert not bad, f"{path.relative_to(PACKAGE_DIR.parent)} imports from above skset.ot: {bad}"


@pytest.mark.parametrize("path", NN_FILES, ids=lambda p: str(p.relative_to(PACKAGE_DIR)))
def test_nn_imports_no_numpy_and_no_settings(path):
    bad = [f"line {line}: {name}" for line, name in _imported_modules(path) if _nn_forbidden(name)]
    assert not bad, f"{path.relative_to(PACKAGE_DIR.parent)} imports {bad}"


def test_engine_rules_catch_violations(tmp_path):
    """The two predicates above on sources that break (and keep) the rules."""
    pkg = tmp_path / "skset"
    (pkg / "ot").mkdir(parents=True)
    (pkg / "nn").mkdir(parents=True)
    cases = {
        ("ot", "from ._common import _tracing"): False,
        ("ot", "from . import _compiled"): False,
        ("ot", "from .._config import _config"): True,
        ("ot", "from .. import _config"): True,
        ("ot", "def f():\n    from ..nn.otk import otk_pool"): True,
        ("ot", "import skset.embedding"): True,
        ("ot", "import torch"): False,
        ("nn", "import numpy as np"): True,
        ("nn", "from numpy.linalg import norm"): True,
        ("nn", "from .._config import get_config"): True,
        ("nn", "from ..ot import sinkhorn"): False,
        ("nn", "import numbers"): False,
    }
    for i, ((folder, source), forbidden) in enumerate(cases.items()):
        path = pkg / folder / f"m{i}.py"
        path.write_text(source + "\n")
        names = [name for _, name in _imported_modules(path, pkg)]
        rule = _outside_ot if folder == "ot" else _nn_forbidden
        assert any(map(rule, names)) == forbidden, (source, names)


@pytest.mark.parametrize("path", ENGINE_FILES, ids=lambda p: str(p.relative_to(PACKAGE_DIR)))
def test_engine_imports_no_estimator(path):
    bad = [f"line {line}: {name}" for line, name in _imported_modules(path) if _is_forbidden(name)]
    assert not bad, f"{path.relative_to(PACKAGE_DIR.parent)} imports estimator code: {bad}"


def test_relative_imports_are_resolved(tmp_path):
    """The checker itself: relative and absolute forms, inside functions too."""
    pkg = tmp_path / "skset"
    (pkg / "nn").mkdir(parents=True)
    cases = {
        "from ..embedding import OTKEmbedding": True,
        "from .. import embedding": True,
        "from .. import ot": False,
        "from ..ot import sinkhorn": False,
        "from .otk import OTKLayer": False,
        "from ..neural_network._otk import x": True,
        "import sklearn": True,
        "from sklearn.utils.validation import check_is_fitted": True,
        "import skset.utils": True,
        "import sklearnish": False,
        "def f():\n    from sklearn.utils import check_array": True,
    }
    for i, (source, forbidden) in enumerate(cases.items()):
        path = pkg / "nn" / f"m{i}.py"
        path.write_text(source + "\n")
        names = [name for _, name in _imported_modules(path, pkg)]
        assert any(map(_is_forbidden, names)) == forbidden, (source, names)


ESTIMATOR_MODULES = ("skset.embedding", "skset.kernel_approximation", "skset.cluster",
                     "skset.neural_network")


@pytest.mark.parametrize("rel, forbidden", [
    # the unsupervised transformers are siblings: neither imports the other
    ("kernel_approximation.py", ("skset.embedding",)),
    ("embedding/__init__.py", ("skset.kernel_approximation",)),
    ("embedding/_estimator.py", ("skset.kernel_approximation",)),
    ("embedding/_references.py", ("skset.kernel_approximation",)),
    # the shared streaming maths takes arrays, never an estimator: it imports none
    ("_streaming.py", ESTIMATOR_MODULES),
    # the choice of the element map is below NystromFeatures: no cycle back to it
    ("_map_selection.py", ESTIMATOR_MODULES),
    # export asks each estimator for its serving module (``_serving_module``)
    ("export.py", ESTIMATOR_MODULES),
    # persistence reads the classes already defined; the package root imports it
    ("_persist.py", ("skset",)),
])
def test_estimator_layer_imports(rel, forbidden):
    def bad_name(name):
        if forbidden == ("skset",):
            return name == "skset"
        return any(name == f or name.startswith(f + ".") for f in forbidden)

    bad = [f"line {line}: {name}" for line, name in _imported_modules(PACKAGE_DIR / rel)
           if bad_name(name)]
    assert not bad, f"skset/{rel} imports {bad}"


def test_estimator_bases_stay_shallow():
    # one base class of skset's own on top of scikit-learn's BaseEstimator (no mixins), and the
    # neural base at most 8 classes deep in its method resolution order (object included)
    from sklearn.base import BaseEstimator

    from skset._base import SksetEstimator
    from skset.neural_network._base import BaseNeuralEstimator, SetNetworkEstimator

    assert SksetEstimator.__mro__[1] is BaseEstimator
    assert len(SetNetworkEstimator.__mro__) <= 8, SetNetworkEstimator.__mro__
    assert len(BaseNeuralEstimator.__mro__) <= 7, BaseNeuralEstimator.__mro__


def test_module_sizes():
    # no module over 700 lines; ABC split by idea, each of its files under 500
    sizes = {p.relative_to(PACKAGE_DIR).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
             for p in PACKAGE_DIR.rglob("*.py")}
    assert {k: v for k, v in sizes.items() if v > 700} == {}
    assert {k: v for k, v in sizes.items() if "cluster/_abc" in k and v >= 500} == {}
