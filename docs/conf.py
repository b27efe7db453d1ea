"""Sphinx configuration for the skset documentation.

Build with ``sphinx-build -W -b html docs docs/_build/html`` from the repository root (the
``docs`` extra installs what it needs: ``pip install -e ".[docs]"``).
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: no spinning threads

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the checkout's skset, not an installed one

import skset  # noqa: E402

project = "skset"
author = "the skset developers"
copyright = "2026, the skset developers"  # noqa: A001
version = release = skset.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax files in the built site (no CDN)
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints", "auto_examples/*.py",
                    "auto_examples/*.ipynb", "auto_examples/*.zip"]
root_doc = "index"
default_role = "literal"

# -- API reference -------------------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options: dict = {}
autodoc_typehints = "none"  # the numpydoc Parameters sections say it
numpydoc_show_class_members = False  # autosummary class template lists the methods
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False

intersphinx_mapping = {
    "python": ("https://docs.python.org/3", None),
    "numpy": ("https://numpy.org/doc/stable/", None),
    "sklearn": ("https://scikit-learn.org/stable/", None),
    "torch": ("https://pytorch.org/docs/stable/", None),
}
# The build must work offline (CI machines have no network): only use inventories that are cached.
if os.environ.get("SKSET_DOCS_OFFLINE", "1") == "1":
    intersphinx_mapping = {}

# Every cross-reference must resolve (``-n``): a wrong path, a private or renamed name fails the
# build. References to other projects' objects resolve through intersphinx when its inventories
# are available (SKSET_DOCS_OFFLINE=0); offline they cannot, and are listed here.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(sklearn|torch|numpy|scipy|pandas|polars|dask|distributed|onnx|onnxruntime|"
               r"joblib|ray)(\..*)?"),
]
nitpick_ignore = [
    # torch.nn.Module.forward's docstring, inherited by the forward methods of skset.nn
    ("py:class", "Module"),
]
if intersphinx_mapping:
    nitpick_ignore_regex = []

# Math is rendered by MathJax 3 served by the built site itself, so that the pages need no network:
# sphinx-mathjax-offline (in the docs extra) ships MathJax and copies it to _static/mathjax; the path
# is relative to _static. SKSET_DOCS_MATHJAX overrides it (e.g. a CDN URL).
mathjax_path = os.environ.get("SKSET_DOCS_MATHJAX", "mathjax/tex-chtml.js")

# -- gallery -------------------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    # plot_*.py are executed (each makes a figure); other scripts (the README's main job, a grid
    # search of about 15 s) are shown with their code, not run.
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py",
    "doc_module": ("skset",),
    "backreferences_dir": "generated/backreferences",
    "inspect_global_variables": False,
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "show_memory": False,
    "plot_gallery": "True",
    "abort_on_example_error": True,
    "reset_modules": ("matplotlib",),
    "matplotlib_animations": False,
}

warnings.filterwarnings("ignore", category=UserWarning,
                        message="Matplotlib is currently using agg")

# -- HTML ----------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"skset {version}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "navbar_align": "left",
    "secondary_sidebar_items": {"*": ["page-toc"], "user_guide/*": ["page-toc"],
                                "generated/*": ["page-toc"], "auto_examples/*": []},
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_sidebars = {"index": [], "install": [], "input_formats": []}
html_show_sourcelink = False


# -- methods inherited from scikit-learn ---------------------------------------------------------
# Their docstrings link to labels of scikit-learn's own documentation (``:ref:`accuracy_score```,
# glossary terms), which do not exist here; the build is offline, so there is no intersphinx
# inventory to resolve them. Keep their text, drop the links.
_SKLEARN_REF = re.compile(r":(?:ref|term):`([^`<]+?)\s*<[^>`]+>`")
_SKLEARN_BARE = re.compile(r":(?:ref|term):`([^`]+)`")


def _unlink_sklearn_refs(app, what, name, obj, options, lines):
    module = getattr(obj, "__module__", "") or ""
    if not module.startswith("sklearn"):
        return
    for i, line in enumerate(lines):
        lines[i] = _SKLEARN_BARE.sub(r"\1", _SKLEARN_REF.sub(r"\1", line))


def setup(app):
    app.connect("autodoc-process-docstring", _unlink_sklearn_refs)
