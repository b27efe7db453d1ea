"""Assemble BENCHMARKS.md from benchmarks/results/*.md (the summary first, then one section per
topic, headings shifted one level down).

    python benchmarks/make_benchmarks_md.py
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOPICS = ["suite", "dilated_kmers", "dilated_kernels", "japanese_vowels", "sinkhorn_tol", "peers",
          "otk_transform", "otk_compiled", "weighted_sinkhorn",
          "set_transformer", "order_test",
          "supervised_otk", "deepsea_shaped", "abc", "st_tasks", "frames", "scale", "partial_fit",
          "robustness", "many_classes", "multilabel", "regression", "threads", "threads_idle",
          "threads_scope", "gpu"]


def shifted(text: str) -> str:
    out = []
    for line in text.splitlines():
        m = re.match(r"^(#+) (.*)$", line)
        if m:
            level = len(m.group(1))
            line = "#" * (2 if level <= 2 else level + 1) + " " + m.group(2)
            if level == 2 and not out:
                line = "## " + m.group(2)
            elif level == 2:
                line = "### " + m.group(2)
        out.append(line)
    return "\n".join(out).strip()


def assemble() -> str:
    """The text of BENCHMARKS.md, from the result files as they are."""
    results = ROOT / "benchmarks" / "results"
    parts = [(results / "_summary.md").read_text().rstrip()]
    parts += [shifted((results / f"{t}.md").read_text()) for t in TOPICS]
    text = "\n\n---\n\n".join(parts)
    text += "\n\n(The sections after the summary are the files in `benchmarks/results/`, one per topic;"
    text += " `python benchmarks/make_benchmarks_md.py` assembles them.)\n"
    return text


def main():
    (ROOT / "BENCHMARKS.md").write_text(assemble())


if __name__ == "__main__":
    main()
