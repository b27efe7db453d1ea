"""Learning curves of the Set Transformer / Deep Sets estimators on unique counting.

Reads the JSON lines written by ``bench_st_tasks.py --json`` and draws the training loss per epoch
of each model (one figure, the docs' user guide shows it)::

    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python benchmarks/bench_st_tasks.py --task counting \\
        --max-iter 20 --json curves.jsonl
    python benchmarks/plot_st_curves.py curves.jsonl docs/_static/st_counting_curves.png
"""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src: str, out: str) -> None:
    rows = [json.loads(line) for line in open(src) if line.strip()]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for r in rows:
        lc = r["loss_curve"]
        ax.plot(range(1, len(lc) + 1), lc, marker="o", ms=3,
                label=f"{r['model']} (test {r['metric']} {r['score']:.3f})")
    ax.axhline(2.20, color="gray", ls=":", lw=1, label="class prior (2.20)")
    ax.set_xlabel("epoch")
    ax.set_ylabel("training cross-entropy")
    ax.set_title(f"Unique counting of digits, {rows[0]['n_train']} training sets, defaults")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out} ({len(rows)} curves)")


if __name__ == "__main__":
    main(*sys.argv[1:3])
