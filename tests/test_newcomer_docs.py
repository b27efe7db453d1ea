"""What a newcomer reads first stays true: the README's set-up block, the offline math of the docs,
the links of the docs' index page and the ABC gallery's account of its stored model. The checks read
the files; nothing is built or installed here (the README's commands were run in a fresh virtual
environment when they were written)."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _readme_setup_commands():
    m = re.match(r"# skset\n\n```bash\n(.*?)\n```\n", README, re.S)
    assert m, "README.md must open with its title, then the set-up commands in a bash block"
    return m.group(1).splitlines()


def test_readme_opens_with_two_setup_commands():
    first, second = _readme_setup_commands()  # exactly two
    # each works in a fresh shell on a fresh machine: the virtual environment is created and
    # activated before anything is installed; torch pinned, from the CPU wheel index, once per
    # command and before skset (after the first command, pip finds it and skips it)
    for cmd in (first, second):
        assert cmd.startswith("python3 -m venv .venv && . .venv/bin/activate && ")
        assert cmd.count("pip install torch") == 1
        assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in cmd
        assert cmd.index("pip install torch") < cmd.index("pip install -e ")
    assert first.endswith("python examples/japanese_vowels_otk.py")
    assert second.endswith('pip install -e ".[test]" && python -m pytest -q')


def test_readme_docs_build_treats_warnings_as_errors():
    commands = re.findall(r"sphinx-build[^`\n]*", README)
    assert commands and all(" -W " in c for c in commands), commands


def _conf_assignments():
    tree = ast.parse((ROOT / "docs" / "conf.py").read_text())
    return {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name)}


def test_docs_math_needs_no_network():
    conf = _conf_assignments()
    extensions = ast.literal_eval(conf["extensions"])
    assert "sphinx.ext.mathjax" in extensions and "sphinx-mathjax-offline" in extensions
    path = conf["mathjax_path"]  # os.environ.get("SKSET_DOCS_MATHJAX", <default>)
    default = ast.literal_eval(path.args[1]) if isinstance(path, ast.Call) else ast.literal_eval(path)
    assert not default.startswith(("http:", "https:", "//")), default
    assert default.startswith("mathjax/")  # the copy sphinx-mathjax-offline puts in _static
    pyproject = (ROOT / "pyproject.toml").read_text()
    docs_extra = re.search(r"^docs = \[(.*?)\]", pyproject, re.S | re.M).group(1)
    assert "sphinx-mathjax-offline" in docs_extra


def test_index_links_every_estimator():
    index = (ROOT / "docs" / "index.rst").read_text()
    table = index[index.index("Which method for which job"):index.index(".. toctree::")]
    for name in ["NystromFeatures", "OTKEmbedding", "OTKClassifier", "SetTransformerClassifier",
                 "DeepSetsClassifier", "ABCClusterer", "EigengapSpectralClustering"]:
        assert f":class:`~skset.{name}`" in table, name
    assert "``ABCClusterer``" not in table


def test_abc_gallery_text_matches_its_commands():
    """The stored model is a skset.save file: the commands that made it must end by writing it."""
    text = (ROOT / "examples" / "plot_abc_circles.py").read_text()
    doc = text[: text.index('"""', 3)]
    assert "stored with :func:`skset.save`" in doc
    commands = doc[doc.index("::\n"):doc.index("On the benchmark")]
    assert "skset.save(abc, 'examples/data/abc_circles_20k.skset')" in commands
    assert "HERE / \"data\" / \"abc_circles_20k.skset\"" in text  # what the example loads
