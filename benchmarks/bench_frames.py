"""Speed of ``skset.sets_from_frame`` and ``skset.frame_from_sets`` on a 1,000,000-row frame.

The frame: 10,000 sets ("S00000" .. "S09999", string ids) of 50 to 150 rows each (1,000,000 rows
in all), 8 float64 feature columns and an integer ``time`` column. Three layouts:

* grouped: the rows of a set are contiguous and sets come in order (files concatenated);
* shuffled: the rows in random order;
* shuffled + order_by: the same, sets sorted within by ``time`` (``order_by="time"``).

Timed, for pandas and polars: ``sets_from_frame`` (frame -> list of sets + ids), ``frame_from_sets``
to a new long frame, and ``frame_from_sets(..., frame=...)`` (the values back as columns of the
original frame, aligned with its rows). Each is run once to warm up, then 5 times: median (and
min). For scale, the usual pandas loop ``[g.to_numpy() for _, g in df.groupby("sample",
sort=False)]`` is timed on the grouped layout.

Run: ``OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python benchmarks/bench_frames.py [--out FILE]
[--repeats 5] [--rows 1000000] [--sets 10000]``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch (imported by skset)

import argparse  # noqa: E402
import datetime  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import polars as pl  # noqa: E402

import skset  # noqa: E402
from skset import frame_from_sets, sets_from_frame  # noqa: E402

FEATURES = [f"m{j}" for j in range(8)]


def make_columns(n_rows: int, n_sets: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(50, 151, n_sets)
    sizes = np.maximum((sizes * n_rows / sizes.sum()).astype(np.int64), 1)
    sizes[-1] += n_rows - sizes.sum()
    ids = np.array([f"S{i:05d}" for i in range(n_sets)])
    X = rng.normal(size=(n_rows, len(FEATURES)))
    time_col = np.concatenate([rng.permutation(n) for n in sizes])  # a set's rows not in time order
    return {"sample": np.repeat(ids, sizes), "time": time_col,
            **{name: X[:, j] for j, name in enumerate(FEATURES)}}


def timed(fn, repeats: int):
    out = fn()  # warm-up
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)), float(np.min(ts)), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--sets", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=None, help="write the markdown table here (else print)")
    args = ap.parse_args()

    cols = make_columns(args.rows, args.sets)
    shuffle = np.random.default_rng(1).permutation(args.rows)
    layouts = {"grouped": (cols, None),
               "shuffled": ({k: v[shuffle] for k, v in cols.items()}, None),
               "shuffled + order_by": ({k: v[shuffle] for k, v in cols.items()}, "time")}
    load_before = os.getloadavg()
    rows = []
    for lib_name, lib in [("pandas", pd), ("polars", pl)]:
        for layout, (data, order_by) in layouts.items():
            frame = lib.DataFrame(data)
            m1, b1, (sets, ids) = timed(
                lambda frame=frame, order_by=order_by: sets_from_frame(
                    frame, by="sample", columns=FEATURES, order_by=order_by), args.repeats)
            assert len(sets) == args.sets and sum(len(s) for s in sets) == args.rows
            m2, b2, long = timed(lambda sets=sets, ids=ids, lib_name=lib_name: frame_from_sets(
                sets, ids, by="sample", columns="z", backend=lib_name), args.repeats)
            assert len(long) == args.rows
            m3, b3, back = timed(lambda sets=sets, ids=ids, frame=frame, order_by=order_by:
                                 frame_from_sets(sets, ids, by="sample", columns="z", frame=frame,
                                                 order_by=order_by), args.repeats)
            # the round trip puts every row's own features next to it
            np.testing.assert_array_equal(np.asarray(back["z0"]), np.asarray(frame["m0"]))
            rows.append((lib_name, layout, m1, b1, m2, b2, m3, b3))
            print(rows[-1], flush=True)
    frame = pd.DataFrame(cols)
    m0, b0, loop_sets = timed(lambda: [g[FEATURES].to_numpy() for _, g in
                                       frame.groupby("sample", sort=False)], args.repeats)
    assert len(loop_sets) == args.sets
    load_after = os.getloadavg()

    lines = [
        f"Run {datetime.datetime.now().isoformat(timespec='minutes')} on {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, pandas {pd.__version__}, "
        f"polars {pl.__version__}, narwhals {__import__('narwhals').__version__}, numpy "
        f"{np.__version__}, skset {skset.__version__}; {args.rows:,} rows in {args.sets:,} sets, "
        f"{len(FEATURES)} float64 features; median (min) of {args.repeats} after a warm-up; load "
        f"average {load_before[0]:.1f} before, {load_after[0]:.1f} after.",
        "",
        "| library | layout | sets_from_frame (s) | frame_from_sets, new frame (s) | "
        "frame_from_sets, frame= (s) |",
        "|---|---|---|---|---|",
    ]
    for lib_name, layout, m1, b1, m2, b2, m3, b3 in rows:
        lines.append(f"| {lib_name} | {layout} | {m1:.3f} ({b1:.3f}) | {m2:.3f} ({b2:.3f}) | "
                     f"{m3:.3f} ({b3:.3f}) |")
    lines += ["", f"For scale: the pandas loop `[g[features].to_numpy() for _, g in "
              f"df.groupby('sample', sort=False)]` on the grouped layout: {m0:.3f} s ({b0:.3f})."]
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    print(text)


if __name__ == "__main__":
    main()
