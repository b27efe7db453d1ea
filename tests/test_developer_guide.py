"""The developer guide (docs/developer_guide.rst) is kept true to the code: the paths it names
exist, every module of the package is named in it, and it lists every callback of the training
loop."""

import re
from pathlib import Path

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
