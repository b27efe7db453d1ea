"""The developer guide (docs/developer_guide.rst) is kept true to the code: the paths and the
names it gives exist, every module of the package is named in it, and it lists every callback of
the training loop."""

import ast
import importlib
import re
from pathlib import Path

import pytest

from skset.neural_network import _callbacks

ROOT = Path(__file__).resolve().parent.parent
GUIDE = (ROOT / "docs" / "developer_guide.rst").read_text(encoding="utf-8")


def test_named_paths_exist():
    paths = set(re.findall(r"``(skset/[\w/]*?(?:\.py|/))``", GUIDE))
    assert len(paths) > 20
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"the developer guide names paths that do not exist: {missing}"


def test_every_module_is_named():
    unnamed = []
    for path in sorted((ROOT / "skset").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if path.name == "__init__.py" or "/data/" in rel:
            continue
        folder = rel.rsplit("/", 1)[0] + "/"
        if f"``{rel}``" in GUIDE or (f"``{folder}``" in GUIDE and f"``{path.name}``" in GUIDE):
            continue
        unnamed.append(rel)
    assert not unnamed, f"modules missing from docs/developer_guide.rst: {unnamed}"


def test_every_callback_is_listed():
    missing = [name for name in _callbacks.__all__ if f"``{name}``" not in GUIDE]
    assert not missing, f"callbacks missing from the developer guide: {missing}"


# -- the names the guide gives -------------------------------------------------------------------
LITERALS = set(re.findall(r"``([^`]+)``", GUIDE))
SOURCES = sorted((ROOT / "skset").rglob("*.py"))
#: names of Python and of other libraries the guide mentions (scikit-learn's, torch's)
FOREIGN = {"None", "True", "False", "TransformerMixin", "sklearn", "gradcheck", "ray", "pyspark"}


def _resolve(dotted: str):
    """The object a ``skset.x.y`` name stands for: the longest importable module prefix, then
    attributes; an ``AttributeError`` or ``ImportError`` when it does not exist."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def _skset_classes() -> dict[str, object]:
    """Every class defined in the package, by name (the modules imported)."""
    found = {}
    for path in SOURCES:
        rel = path.relative_to(ROOT).with_suffix("").parts
        module = ".".join(rel[:-1] if rel[-1] == "__init__" else rel)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
        if names:
            mod = importlib.import_module(module)
            found.update({n: getattr(mod, n) for n in names})
    return found


def _defined_names() -> set[str]:
    """Every name the package's sources define or assign: module-level and class-level
    functions, classes, constants and attributes (``self.x = ...`` included), and parameters."""
    names = {n.name for path in sorted((ROOT / "tests").glob("test_*.py"))  # tests it points to
             for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.add(node.value)  # parameter tables: {"n_components": ...}
    return names


def test_dotted_skset_names_exist():
    """``skset.x.y`` (a call's arguments left out) names a module, function, class or
    attribute that exists."""
    dotted = sorted({lit.split("(")[0] for lit in LITERALS if re.match(r"skset\.\w", lit)})
    assert len(dotted) > 10
    missing = []
    for name in dotted:
        try:
            _resolve(name)
        except (ImportError, AttributeError):
            missing.append(name)
    assert not missing, f"the developer guide names what does not exist: {missing}"


def test_class_attributes_exist():
    """``Class.name`` (a class of the package and one of its attributes or methods) exists."""
    classes = _skset_classes()
    pairs = sorted(lit for lit in LITERALS if re.fullmatch(r"[A-Z]\w*\.\w+", lit)
                   and not re.search(r"\.(md|py|rst|txt)$", lit))
    assert len(pairs) >= 3
    missing = [p for p in pairs if p.split(".")[0] not in classes
               or not hasattr(classes[p.split(".")[0]], p.split(".")[1])]
    assert not missing, f"the developer guide names class attributes that do not exist: {missing}"


def test_bare_names_exist():
    """Every bare identifier (a class, a function, a constant, a parameter, an attribute) is a
    name the package defines or uses; the few of other libraries are listed in ``FOREIGN``."""
    idents = sorted(lit.rstrip("()") for lit in LITERALS
                    if re.fullmatch(r"_*[A-Za-z]\w*(\(\))?", lit))
    assert len(idents) > 50
    defined = _defined_names() | FOREIGN
    missing = [n for n in idents if n not in defined]
    assert not missing, f"the developer guide names what the package does not have: {missing}"


@pytest.mark.parametrize("name, exists", [
    ("skset.utils.partial_fit", True), ("skset.utils.check_sets", False),
    ("skset._sets.check_sets", True), ("skset.nn.attention._zero_padding", True),
    ("skset.distributed.nope", False), ("skset.nope", False)])
def test_resolve(name, exists):
    """The checker itself: a name that does not exist is found out."""
    try:
        _resolve(name)
        found = True
    except (ImportError, AttributeError):
        found = False
    assert found == exists
