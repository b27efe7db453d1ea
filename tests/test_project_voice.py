"""The documents speak about the software and what was measured, never about how the work was
organised: README.md, the docs, the benchmark results (and BENCHMARKS.md built from them), the
examples, and the comments and strings of skset's sources hold none of the process phrases below."""

import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_ORDINALS = "first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth"
# Each pattern is matched case-insensitively on one line at a time.
PROCESS_PATTERNS = [
    # a stop as a unit of work ("this stop", "the fifth stop's run", "both stops"); the technical
    # uses ("a stop early in the decay", "``stop = True``", "the stopping rule", "a schedule
    # that stops") do not match
    rf"\b(?:this|the|last|next|previous|each|latest|{_ORDINALS}) stop(?:'s)?\b(?!\s*=)",
    r"\b(?:both|these|those|earlier|previous|later) stops\b",
    # a session as a unit of work; an API object does not match: ``InferenceSession``,
    # ``SparkSession``, ``Session(``, ``session.run``, ``session = ...``
    r"(?<![\w.])sessions?\b(?!\(|\s*=|\.\w)",
    r"\bhelper's|\bhelpers'",  # "the helper's run", "other helpers' jobs"
    r"\bthe helper\b",
    r"\bprevious helper\b",
    r"\bother helpers\b",
    r"\bsub-?agents?\b",
    r"\bworktrees?\b",
    r"\bthis evening\b",
]
_REGEX = re.compile("|".join(f"(?:{p})" for p in PROCESS_PATTERNS), re.IGNORECASE)

# comments and string literals (f-strings are split into pieces from Python 3.12)
_TEXT_TOKENS = {tokenize.COMMENT, tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", -1)}

# Legitimate uses of a listed word, as (path, text on the line).
ALLOWED = {
    ("docs/user_guide/scaling.rst", "every session of a site"),  # a web site's user sessions
}


def find_process_words(text: str, path: str = "<text>", python: bool = False):
    """Return ``"path:line: match -- line"`` for each process phrase in ``text``. With
    ``python``, only comments and string literals (docstrings included) are read, so that code
    identifiers are left alone."""
    if python:
        lines = [""] * (text.count("\n") + 2)
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in _TEXT_TOKENS:
                for k, piece in enumerate(tok.string.split("\n")):
                    lines[tok.start[0] - 1 + k] += " " + piece
    else:
        lines = text.splitlines()
    found = []
    for lineno, line in enumerate(lines, 1):
        if any(path == p and allowed in line for p, allowed in ALLOWED):
            continue
        for m in _REGEX.finditer(line):
            found.append(f"{path}:{lineno}: {m.group(0)!r} -- {line.strip()[:160]}")
    return found


def _files():
    out = [ROOT / "README.md", ROOT / "BENCHMARKS.md"]
    out += sorted((ROOT / "docs").rglob("*.rst"))
    out += sorted((ROOT / "benchmarks" / "results").glob("*.md"))
    out += sorted((ROOT / "examples").glob("*.py"))
    out += sorted((ROOT / "skset").rglob("*.py"))
    return out


def test_checker_reports_process_words():
    bad = ("Re-run at the end of this stop (second session (2026-11-21)).\n"
           "The helper's run, from a git worktree, this evening.\n"
           "In the fifth stop's run other helpers' jobs ran; a subagent; two sessions.\n")
    found = find_process_words(bad, "bad.md")
    matched = [re.search(r": (['\"])(.*)\1 -- ", f).group(2).lower() for f in found]
    assert matched == ["this stop", "session", "the helper", "worktree", "this evening",
                       "fifth stop's", "other helpers", "subagent", "sessions"], found
    assert {f.split(":")[1] for f in found} == {"1", "2", "3"}
    assert all(f.startswith("bad.md:") for f in found)
    # comments and strings of Python sources are read, code identifiers are not
    code = ('session = ort.InferenceSession(path)  # measured this evening\n'
            'x = session.run(None, feed)\n'
            '"""Same as the previous helper."""\n')
    found = find_process_words(code, "mod.py", python=True)
    assert [f.split(" -- ")[0] for f in found] == ["mod.py:1: 'this evening'",
                                                  "mod.py:3: 'previous helper'"], found


@pytest.mark.parametrize("good", [
    "the stopping rule ends training; a stop early in the decay",
    "a callback sets ``stop = True``; the schedule stops at a stall, a schedule that stops",
    "onnxruntime.InferenceSession, a SparkSession, requests.Session()",
    "one copy of each weighting helper; onnxruntime helpers",
])
def test_checker_leaves_technical_uses(good):
    assert find_process_words(good) == []


def test_documents_have_no_process_words():
    found = []
    for f in _files():
        rel = f.relative_to(ROOT).as_posix()
        found += find_process_words(f.read_text(encoding="utf-8"), rel, python=f.suffix == ".py")
    assert not found, "process words in the documents:\n" + "\n".join(found)
