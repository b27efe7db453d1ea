"""The engine (``skset.nn``, ``skset.ot``, ``skset._sets``, ``skset._stats``...) depends on no estimator.

The estimators build on the engine, never the other way round: no engine module imports
scikit-learn or one of skset's estimator modules, at module level or inside a function. Within
the engine, the OT package ``skset/ot/`` is the bottom: it imports no other skset module (no
``skset._config`` either: its callers pass the compiled-or-eager choice); the layers of
``skset/nn/`` import neither numpy nor ``skset._config`` (they take arguments; the estimators read
the settings). The check parses the sources (nothing is imported), resolving relative imports.
"""

import ast
import functools
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "skset"
OT_FILES = sorted((PACKAGE_DIR / "ot").glob("*.py"))
NN_FILES = sorted((PACKAGE_DIR / "nn").glob("*.py"))
ENGINE_FILES = sorted([*NN_FILES, *OT_FILES,
                       PACKAGE_DIR / "_sets.py", PACKAGE_DIR / "_weighting.py", PACKAGE_DIR / "_stats.py",
                       PACKAGE_DIR / "_finite.py", PACKAGE_DIR / "_frames.py",
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
    "skset._torch",  # imports scikit-learn (check_random_state)
    "skset._validation",
    "skset._base",
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
                     "skset.neural_network", "skset.dilated_kernels")


@pytest.mark.parametrize("rel, forbidden", [
    # the unsupervised transformers are siblings: neither imports the other
    ("kernel_approximation.py", ("skset.embedding",)),
    ("embedding/__init__.py", ("skset.kernel_approximation",)),
    ("embedding/_estimator.py", ("skset.kernel_approximation",)),
    ("embedding/_references.py", ("skset.kernel_approximation",)),
    ("dilated_kernels.py", ("skset.embedding", "skset.kernel_approximation")),
    # the shared streaming maths takes arrays, never an estimator: it imports none
    ("_streaming.py", ESTIMATOR_MODULES),
    # the choice of the element map is below NystromFeatures: no cycle back to it
    ("_map_selection.py", ESTIMATOR_MODULES),
    # export asks each estimator for its serving module (``_serving_module``)
    ("export.py", ESTIMATOR_MODULES),
    # persistence reads the classes already defined; the package root imports it
    ("_persist.py", ("skset",)),
    # the steps of a pipeline and what each declares: read from attributes, never by importing
    ("_steps.py", ESTIMATOR_MODULES),
    # distributed: the partition layer and the dask driver ask the estimator (its methods, its
    # ``_output_rows``), whatever it is
    ("distributed/__init__.py", ESTIMATOR_MODULES),
    ("distributed/_partitions.py", ESTIMATOR_MODULES),
    ("distributed/_dask.py", ESTIMATOR_MODULES),
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
    # neural base at most 7 classes deep in its method resolution order (object included); the
    # set networks' 9 with scikit-learn's set_output mixin (their transform framed by pandas)
    from sklearn.base import BaseEstimator

    from skset._base import SksetEstimator
    from skset.neural_network._base import BaseNeuralEstimator, SetNetworkEstimator

    assert SksetEstimator.__mro__[1] is BaseEstimator
    assert len(SetNetworkEstimator.__mro__) <= 9, SetNetworkEstimator.__mro__
    assert len(BaseNeuralEstimator.__mro__) <= 7, BaseNeuralEstimator.__mro__


def test_module_sizes():
    # no module over 700 lines; ABC split by idea, each of its files under 500
    sizes = {p.relative_to(PACKAGE_DIR).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
             for p in PACKAGE_DIR.rglob("*.py")}
    assert {k: v for k, v in sizes.items() if v > 700} == {}
    assert {k: v for k, v in sizes.items() if "cluster/_abc" in k and v >= 500} == {}


# -- each distributed backend stays in its driver; estimators are never recognised by names ---------
#: the packages of each distributed backend and the one module of skset that may import them (a
#: Ray or Spark driver is already named here: adding one touches no test of the layers)
BACKEND_DRIVERS = {"dask": "distributed/_dask.py", "distributed": "distributed/_dask.py",
                   "ray": "distributed/_ray.py", "pyspark": "distributed/_spark.py"}
SOURCES = sorted(PACKAGE_DIR.rglob("*.py"))


def _backend(name: str) -> str | None:
    """The backend package an imported module belongs to, or ``None``."""
    return next((b for b in BACKEND_DRIVERS if name == b or name.startswith(b + ".")), None)


def _is_dask(name: str) -> bool:
    return _backend(name) in ("dask", "distributed")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE_DIR)))
def test_only_its_driver_imports_a_backend(path):
    """dask is imported by ``skset/distributed/_dask.py`` alone (the partition layer of
    skset.distributed included, no other module imports it; ``skset.distributed`` itself
    resolves to ``skset.distributed...`` and is allowed), and so on for each backend."""
    rel = path.relative_to(PACKAGE_DIR).as_posix()
    bad = [f"line {line}: {name}" for line, name in _imported_modules(path)
           if _backend(name) is not None and BACKEND_DRIVERS[_backend(name)] != rel]
    assert not bad, f"skset/{rel} imports a distributed backend outside its driver: {bad}"


def _compared_names(path: Path) -> list[tuple[int, str]]:
    """``(line, string)`` for every string constant compared with a ``__name__`` attribute
    (``==``, ``!=``, ``in``, ``not in``; a tuple, list or set of strings counts each)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        if not any(isinstance(o, ast.Attribute) and o.attr == "__name__" for o in operands):
            continue
        for o in operands:
            items = o.elts if isinstance(o, (ast.Tuple, ast.List, ast.Set)) else [o]
            found += [(node.lineno, i.value) for i in items
                      if isinstance(i, ast.Constant) and isinstance(i.value, str)]
    return found


@functools.cache
def _classes_by_module() -> dict[str, set[str]]:
    """The names of the classes each module of the package defines."""
    return {_module_name(p, PACKAGE_DIR): {n.name for n in ast.walk(ast.parse(
        p.read_text(encoding="utf-8"))) if isinstance(n, ast.ClassDef)} for p in SOURCES}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE_DIR)))
def test_no_class_is_recognised_by_its_name_elsewhere(path):
    """``type(x).__name__ == "NystromFeatures"`` outside NystromFeatures' module is refused: an
    estimator says what it is (an attribute, a method, a tag) and the caller asks."""
    classes = _classes_by_module()
    own = classes[_module_name(path, PACKAGE_DIR)]
    elsewhere = set().union(*classes.values()) - own
    bad = [f"line {line}: {name!r}" for line, name in _compared_names(path) if name in elsewhere]
    assert not bad, (f"{path.relative_to(PACKAGE_DIR.parent)} recognises skset classes by their "
                     f"names: {bad}")


def test_name_comparisons_are_found(tmp_path):
    """The checker itself: every form of comparison with ``__name__``, and only those."""
    cases = {
        'if type(last).__name__ == "NystromFeatures": pass': ["NystromFeatures"],
        'ok = "OTKEmbedding" != type(x).__name__': ["OTKEmbedding"],
        'ok = cls.__name__ in ("A", "B")': ["A", "B"],
        'ok = cls.__name__ not in {"C"}': ["C"],
        'def f(x):\n    return x.__class__.__name__ == "D"': ["D"],
        'ok = name == "NystromFeatures"': [],
        'ok = type(x).__name__ == other': [],
    }
    for i, (source, names) in enumerate(cases.items()):
        path = tmp_path / f"m{i}.py"
        path.write_text(source + "\n")
        assert [n for _, n in _compared_names(path)] == names, source


def test_dask_imports_are_found(tmp_path):
    pkg = tmp_path / "skset"
    (pkg / "distributed").mkdir(parents=True)
    cases = {"import dask": True, "import dask.dataframe as dd": True,
             "from distributed import Client": True, "from . import _partitions": False,
             "from .. import distributed": False, "import skset.distributed": False,
             "def f():\n    from dask import delayed": True}
    for i, (source, is_dask) in enumerate(cases.items()):
        path = pkg / "distributed" / f"m{i}.py"
        path.write_text(source + "\n")
        names = [name for _, name in _imported_modules(path, pkg)]
        assert any(map(_is_dask, names)) == is_dask, (source, names)


# -- one home for each name --------------------------------------------------------------------------
def _names_imported_from(module: str, roots) -> list[tuple[str, int, str]]:
    """``(file, line, name)`` for every name imported from ``module`` (absolute or relative
    ``from ... import``) in the Python files under ``roots``."""
    found = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            inside = PACKAGE_DIR in path.parents
            package = _module_name(path, PACKAGE_DIR).rpartition(".")[0] if inside else ""
            for node in ast.walk(tree):
                if not isinstance(node, ast.ImportFrom):
                    continue
                if node.level:
                    if not inside:
                        continue
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - (node.level - 1)])
                    base = f"{base}.{node.module}" if node.module else base
                else:
                    base = node.module
                if base == module:
                    found += [(path.name, node.lineno, a.name) for a in node.names]
    return found


def test_callbacks_have_one_home():
    """The callbacks are imported from ``skset.neural_network._callbacks`` only, never through
    the training loop's module (which uses some but exports none)."""
    from skset.neural_network import _callbacks, _training

    callbacks = set(_callbacks.__all__)
    assert not callbacks & set(_training.__all__)
    roots = [PACKAGE_DIR, PACKAGE_DIR.parent / "tests", PACKAGE_DIR.parent / "benchmarks"]
    bad = [f"{f}:{line}: {name}" for f, line, name
           in _names_imported_from("skset.neural_network._training", roots) if name in callbacks]
    assert not bad, f"callbacks imported from _training instead of _callbacks: {bad}"


def _top_and_lazy_imports(path: Path) -> tuple[set[str], list[tuple[int, str]]]:
    """The modules imported at the top of ``path``, and ``(line, module)`` of every import
    inside a function (``from m import x`` counts ``m``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    top = {name for line, name in _imported_modules(path)
           if any(getattr(n, "lineno", None) == line and isinstance(n, (ast.Import, ast.ImportFrom))
                  for n in tree.body)}
    lazy = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = {n.lineno for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))}
            lazy += [(line, name) for line, name in _imported_modules(path) if line in lines]
    return top, lazy


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE_DIR)))
def test_no_lazy_import_of_a_module_imported_at_the_top(path):
    """An import inside a function is for an optional dependency or a cycle; a module the file
    already imports at its top is imported there."""
    top, lazy = _top_and_lazy_imports(path)
    bad = sorted({f"line {line}: {name}" for line, name in lazy if name in top})
    assert not bad, f"{path.relative_to(PACKAGE_DIR.parent)} imports again inside a function: {bad}"
