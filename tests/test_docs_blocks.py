"""The ``.. code-block:: python`` blocks of the documentation run as shown.

The blocks of one page run in order in one namespace (a page's later block may use what an
earlier one defined, as a reader pasting them one after the other would). Blocks written as
doctests (``>>>``) are run by :mod:`doctest` and their printed output is compared. A block is
skipped when it imports a module that is not installed, or when an RST comment right above it
says ``.. skip-test: <reason>`` (a block that needs a cluster, a data file of the user's, or
minutes of fitting); the reason is part of the skip message.
"""

import doctest
import importlib.util
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.rst")) + sorted((ROOT / "docs" / "user_guide").glob("*.rst"))

_DIRECTIVE = re.compile(r"^(\s*)\.\. code-block:: python\s*$")
_SKIP = re.compile(r"^\s*\.\. skip-test:\s*(.*)$")
_IMPORT = re.compile(r"^\s*(?:>>>\s*)?(?:from\s+([\w.]+)\s+import|import\s+([\w.]+))", re.M)


def extract_blocks(text):
    """``[(line, source, skip_reason or None)]`` for the python code blocks of an RST text."""
    lines = text.splitlines()
    blocks, i, skip = [], 0, None
    while i < len(lines):
        line = lines[i]
        m_skip = _SKIP.match(line)
        if m_skip:
            skip = m_skip.group(1).strip() or "marked skip-test"
            i += 1
            continue
        m = _DIRECTIVE.match(line)
        if not m:
            if line.strip():
                skip = None                   # a skip marker applies to the next block only
            i += 1
            continue
        indent = len(m.group(1))
        start, i = i + 1, i + 1
        while i < len(lines) and lines[i].strip().startswith(":"):   # directive options
            i += 1
        body = []
        while i < len(lines) and (not lines[i].strip()
                                  or len(lines[i]) - len(lines[i].lstrip()) > indent):
            body.append(lines[i])
            i += 1
        while body and not body[-1].strip():
            body.pop()
        blocks.append((start, textwrap.dedent("\n".join(body)).strip("\n") + "\n", skip))
        skip = None
    return blocks


def missing_modules(source):
    out = []
    for m in _IMPORT.finditer(source):
        top = (m.group(1) or m.group(2)).split(".")[0]
        if importlib.util.find_spec(top) is None:
            out.append(top)
    return out


def run_block(source, namespace, name):
    """Run one block in ``namespace``; a doctest block must print what it shows."""
    if source.lstrip().startswith(">>>"):
        test = doctest.DocTestParser().get_doctest(source, namespace, name, name, 0)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS
                                       | doctest.NORMALIZE_WHITESPACE)
        out = []
        runner.run(test, out=out.append, clear_globs=False)
        namespace.update(test.globs)          # DocTest ran on a copy of the namespace
        if runner.failures:
            raise AssertionError("".join(out))
    else:
        exec(compile(source, name, "exec"), namespace)


def _pages_with_blocks():
    return [p for p in PAGES if extract_blocks(p.read_text())]


@pytest.fixture
def process_state():
    """skset's global settings and torch's thread count put back after a page (its blocks may
    call ``skset.set_config(n_threads=1)``, ``torch.set_num_threads``...): the later tests of the
    process must see the defaults."""
    import torch

    import skset

    config, threads = skset.get_config(), torch.get_num_threads()
    yield
    skset.set_config(**config)
    torch.set_num_threads(threads)


@pytest.mark.parametrize("page", _pages_with_blocks(),
                         ids=lambda p: str(p.relative_to(ROOT / "docs")))
def test_code_blocks_of_page_run(page, tmp_path, monkeypatch, process_state):
    monkeypatch.chdir(tmp_path)               # blocks that write files (clf.onnx) write here
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    namespace = {"__name__": "docs_block"}
    ran, skipped = 0, []
    for line, source, reason in extract_blocks(page.read_text()):
        where = f"{page.relative_to(ROOT)}:{line}"
        missing = missing_modules(source)
        if reason or missing:
            skipped.append(f"{where} ({reason or 'needs ' + ', '.join(missing)})")
            continue
        try:
            run_block(source, namespace, where)
        except Exception as exc:
            raise AssertionError(f"the code block at {where} fails: "
                                 f"{type(exc).__name__}: {exc}") from exc
        ran += 1
    if not ran:
        pytest.skip("every block skipped: " + "; ".join(skipped))


def test_every_page_with_code_has_a_block_that_runs():
    # the skip rules must not swallow every block of the user guide
    runnable = [(p, b) for p in PAGES for b in extract_blocks(p.read_text())
                if not b[2] and not missing_modules(b[1])]
    assert len(runnable) >= 10


BAD_PAGE = """\
Title
=====

.. code-block:: python

   import numpy as np
   x = np.arange(3)

Text.

.. skip-test: needs a cluster

.. code-block:: python

   client = Client("tcp://nowhere:8786")

.. code-block:: python

   >>> int(x.sum())
   3

.. code-block:: python

   y = pipe.fit(x)
"""


def test_extraction_and_a_bad_block_fail():
    blocks = extract_blocks(BAD_PAGE)
    assert [b[2] for b in blocks] == [None, "needs a cluster", None, None]
    assert blocks[0][1] == "import numpy as np\nx = np.arange(3)\n"
    namespace = {}
    run_block(blocks[0][1], namespace, "bad:1")
    np.testing.assert_array_equal(namespace["x"], [0, 1, 2])
    run_block(blocks[2][1], namespace, "bad:3")      # the doctest output matches
    with pytest.raises(NameError, match="pipe"):
        run_block(blocks[3][1], namespace, "bad:4")
    with pytest.raises(AssertionError, match="Expected"):
        run_block(">>> int(x.sum())\n4\n", namespace, "bad:5")
    assert missing_modules("import numpy\nfrom surely_not_a_module.sub import f\n") == [
        "surely_not_a_module"]
