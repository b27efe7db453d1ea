"""Every figure of README.md's results part is one the report states.

The checked part is the README's ``## Benchmarks`` section: from that heading to the next
``## `` heading, every table row and every paragraph (a run of non-blank lines). Each number in it
(integers, decimals, ``1e-6``; a sign, a ``%`` or an ``x`` after it are not part of the number)
must appear verbatim, as a whole number (``0.2`` does not match ``0.20`` or ``10.2``), in
BENCHMARKS.md or in one of the ``benchmarks/results/*.md`` files that its row or paragraph names.
Not checked: numbers inside inline code (``max_steps=30000``, file names), versions (``2.13.0``),
issue numbers (``issue 14``, ``issue-14``), dates and years, commit ids. A named results file that
does not exist is a finding too.

The report is read when the test runs: no figure is copied here.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Benchmarks"

_CODE = re.compile(r"`[^`]*`")
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_RESULTS_FILE = re.compile(r"benchmarks/results/((?:notes/)?[\w.-]+\.md)")
# not measurements: versions, dates, years, issue numbers
_IGNORED = re.compile(
    r"\d+\.\d+\.\d+"  # versions
    r"|\b\d{4}-\d{2}-\d{2}\b"  # dates
    r"|\b(?:19|20)\d{2}\b"  # years
    r"|\bissues?[ -]\d+(?:\s*(?:,|and|part)\s*\d+)*",  # issue numbers
    re.IGNORECASE,
)
_NUMBER = re.compile(
    r"(?<![A-Za-z_\d])(?<!\d[.,])"  # not inside an identifier (S1, a6723e9) or another number
    r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?"  # 1,000,000
    r"|\d+(?:\.\d+)?(?:e-?\d+)?)"  # 0.763, 16, 1e-6
)


def results_units(readme: str):
    """(first line number, text) of each table row and paragraph of the results section."""
    lines = readme.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == SECTION), None)
    if start is None:
        raise AssertionError(f"README has no {SECTION!r} section")
    units, block = [], []
    for i in range(start + 1, len(lines) + 1):
        line = lines[i] if i < len(lines) else ""
        if line.startswith("## "):
            break
        if line.startswith("|") or not line.strip():
            if block:
                units.append(block)
                block = []
            if line.startswith("|") and not re.fullmatch(r"[|\s:-]+", line):
                units.append([(i + 1, line)])
            continue
        block.append((i + 1, line))
    if block:
        units.append(block)
    return units


def numbers(text: str):
    """The figures of one README line, as (number, context)."""
    masked = _LINK_TARGET.sub(lambda m: " " * len(m.group()), text)
    masked = _CODE.sub(lambda m: " " * len(m.group()), masked)
    masked = _IGNORED.sub(lambda m: " " * len(m.group()), masked)
    found = []
    for m in _NUMBER.finditer(masked):
        context = text[max(0, m.start() - 30): m.end() + 20].strip()
        found.append((m.group(), context))
    return found


def _occurs(number: str, text: str) -> bool:
    # whole numbers only; a unit may follow ("1.55x", "85.9%") and "..", "-" may precede
    pattern = r"(?<![\d])(?<!\d[.,])" + re.escape(number) + r"(?!\d)(?![.,]\d)"
    return re.search(pattern, text) is not None


def readme_drift(readme: str, read_report):
    """The README figures that the report does not state.

    ``read_report(name)`` returns the text of ``"BENCHMARKS.md"`` or of a results file name such
    as ``"peers.md"``, or None when there is no such file. Returns messages naming the README line
    and the number."""
    benchmarks = read_report("BENCHMARKS.md")
    if benchmarks is None:
        return ["BENCHMARKS.md not found"]
    problems = []
    for unit in results_units(readme):
        named = []
        for lineno, line in unit:
            for name in _RESULTS_FILE.findall(line):
                text = read_report(name)
                if text is None:
                    problems.append(f"README.md:{lineno}: names benchmarks/results/{name}, "
                                    "which does not exist")
                else:
                    named.append(text)
        for lineno, line in unit:
            for number, context in numbers(line):
                if not any(_occurs(number, text) for text in [benchmarks, *named]):
                    where = "BENCHMARKS.md" + ("" if not named else " nor in the results files "
                                               "the lines name")
                    problems.append(f"README.md:{lineno}: {number} (in '{context}') is not in "
                                    f"{where}")
    return problems


def _read_repo_report(name):
    path = ROOT / name if name == "BENCHMARKS.md" else ROOT / "benchmarks" / "results" / name
    return path.read_text(encoding="utf-8") if path.is_file() else None


def test_readme_figures_are_in_the_report():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    problems = readme_drift(readme, _read_repo_report)
    assert not problems, "\n".join(problems)


def test_the_results_section_has_figures():
    # the checker reads the section it is meant to: rows and paragraphs with numbers in them
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    units = results_units(readme)
    assert sum(len(numbers(line)) for unit in units for _, line in unit) >= 50


_REPORT = {
    "BENCHMARKS.md": "| Normal Var | ST 0.144 vs **ST++ 0.024**; 1,000 sets; 0.20 of the matmul |",
    "abc_seeds.md": "| **worst** | | **0.763** | **37%** | **0.740** |",
}
_README = """# skset

pip install torch==2.13.0 (issue 14, 2026-11-23)

## Benchmarks

| what | result |
| --- | --- |
| Normal Var | ST++ 0.024 vs ST 0.144 on 1,000 sets, `max_steps=30000` |
| matmul share | 0.20 of the matmul (issue 26) |

ABC (`benchmarks/results/abc_seeds.md`): NMI 0.763
worst and 0.740 with the true k.

## Development

0.5 s
"""


def test_checker_passes_a_snippet_whose_figures_are_in_the_report():
    assert readme_drift(_README, _REPORT.get) == []


def test_checker_reports_a_drifted_number():
    drifted = _README.replace("NMI 0.763", "NMI 0.719").replace("0.20 of", "0.2 of")
    problems = readme_drift(drifted, _REPORT.get)
    assert len(problems) == 2, problems
    assert problems[0].startswith("README.md:10: 0.2 (in ")
    assert problems[1].startswith("README.md:12: 0.719 (in ")
    assert "not in BENCHMARKS.md nor in the results files" in problems[1]


def test_checker_reports_a_figure_of_an_unnamed_results_file():
    # 0.763 is in abc_seeds.md only: a paragraph that does not name that file does not pass
    unnamed = _README.replace("(`benchmarks/results/abc_seeds.md`)", "")
    problems = readme_drift(unnamed, _REPORT.get)
    assert [p.split(" (in")[0] for p in problems] == ["README.md:12: 0.763", "README.md:13: 0.740"]


def test_checker_reports_a_missing_results_file():
    renamed = _README.replace("abc_seeds.md", "abc_seed.md")
    problems = readme_drift(renamed, _REPORT.get)
    assert problems[0] == ("README.md:12: names benchmarks/results/abc_seed.md, which does not "
                           "exist")


def test_benchmarks_md_is_assembled_from_the_result_files():
    """BENCHMARKS.md is ``benchmarks/make_benchmarks_md.py``'s assembly of the result files as they
    are: a result file changed without the report regenerated leaves the report stale (its
    tables of features far from zero were missing). Regenerate with ``python
    benchmarks/make_benchmarks_md.py``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_benchmarks_md",
                                                  ROOT / "benchmarks" / "make_benchmarks_md.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "BENCHMARKS.md").read_text() == module.assemble()
