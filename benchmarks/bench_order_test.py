"""The set networks' k-mer rule on every data set they are run on: the width (and dilation) the
NystromFeatures rule takes, then the order test that keeps them only when the k-mers of the sets
as given beat the k-mers of the same sets with their elements shuffled
(``skset._map_selection.order_statistic`` above ``MIN_T_ORDER``).

    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python benchmarks/bench_order_test.py \\
        --seeds 0 1 2 --out results/order_test.jsonl
    python benchmarks/bench_order_test.py --table results/order_test.jsonl
    python benchmarks/bench_order_test.py --null    # the statistic on exchangeable sets

``--copies N`` runs the test on ``N`` shuffled copies instead of ``ORDER_SHUFFLES``.

Rows: the real-data suite in the ``set`` framing (the elements as given) and the ``seq`` framing
(the series and DNA sets as k-mers of ``KINDS[name]["window"]``, in their order), unique
counting and max regression (``bench_st_tasks.py``'s data), and the regression rows of
``bench_regression.py`` (labels: the targets). The rule runs as ``choose_kmers`` runs it in a
network's ``fit`` of ``random_state=seed`` (float32 sets; the rule's stream is the fit's seed + 2);
the width the rule took and the test's statistic are read through wrappers of the test's steps.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _records import emit  # noqa: E402
from suite_data import KINDS, load  # noqa: E402

import skset._map_selection as ms  # noqa: E402
from skset._sets import check_sets, kmer_windows  # noqa: E402
from skset._stats import paired_t  # noqa: E402
from skset._torch import seed_from_random_state  # noqa: E402
from skset.nn.nystrom import DEFAULT_EIGENVALUE_FLOOR, DEFAULT_N_COMPONENTS  # noqa: E402

SUITE = ["ItalyPowerDemand", "GunPoint", "ArrowHead", "JapaneseVowels", "BasicMotions",
         "PickupGestureWiimoteZ", "MNISTBags50", "MNISTBags200", "MNISTBags500", "SpokenDigits",
         "WatchWindows", "OSULeaf", "ACSF1", "WatchMagnitude", "DigitPatches", "GeneFamilies"]
TASKS = ["counting", "maxreg", "normalvar", "mi"]


def rows(names, tasks, seed):
    """``(name, framing, sets, labels)`` of every row."""
    for name in names:
        X, _, y, _ = load(name)
        X = [np.asarray(x, dtype=np.float64) for x in X]
        yield name, "set", X, np.asarray(y)
        w = KINDS[name]["window"]
        if w:
            yield name, "seq", kmer_windows(X, w), np.asarray(y)
    for task in tasks:
        if task == "counting":
            from bench_st_tasks import data

            X, y, _, _ = data("counting", 6000, 10, seed)
        else:
            from bench_regression import row_data

            X, y, _, _ = row_data(task, seed, quick=False)
        yield task, "set", [np.asarray(x, dtype=np.float64) for x in X], np.asarray(y)


def rule(sets, y, random_state):
    """``(width the rule took, its dilation, the test's statistic or None, width kept)`` for a
    network of ``random_state`` (float32, its default dtype): one ``select_window`` run, read
    through wrappers of the test's two steps."""
    sets = check_sets(sets, compute_dtype=torch.float32).sets
    seed = seed_from_random_state(random_state)
    seen = {}
    errors_fn, statistic_fn = ms.shuffled_kmer_errors, ms.order_statistic

    def errors(sets, target, window, dilation, *args, **kw):
        seen["taken"] = (window, dilation)
        return errors_fn(sets, target, window, dilation, *args, **kw)

    def statistic(*args):
        seen["t"] = statistic_fn(*args)
        return seen["t"]

    ms.shuffled_kmer_errors, ms.order_statistic = errors, statistic
    try:
        w, d, _ = ms.select_window(
            sets, y, kmer_coding="level_shape", fixed={}, default=ms.DEFAULT_CHOICE,
            n_components=DEFAULT_N_COMPONENTS, eigenvalue_floor=DEFAULT_EIGENVALUE_FLOOR,
            rng=np.random.RandomState((seed + 2) % 2**32), dilate=True, order_test=True)
    finally:
        ms.shuffled_kmer_errors, ms.order_statistic = errors_fn, statistic_fn
    if "t" not in seen:  # the rule kept single elements: no test
        return w, d, None, w
    return (*seen["taken"], float(seen["t"]), w)


def null(draws=40, streams=30):
    """The test's statistic where the order means nothing (Normal Var: 100 sets of 50 i.i.d.
    samples, the target their variance; 3-mers): over ``streams`` random streams on one draw of
    the data, and over ``draws`` draws (one stream each); beside it, the paired t of the sets'
    per-set errors against the copies' mean (what the statistic replaces)."""
    from skset.datasets import make_normal_var

    def both(data_seed, stream):
        X, y = make_normal_var(100, set_size=50, random_state=data_seed)
        errors, shuffled = ms.shuffled_kmer_errors(
            [np.asarray(x) for x in X], ms._targets("regression", np.asarray(y, dtype=float)), 3,
            1, "level_shape", ms.DEFAULT_CHOICE, n_components=DEFAULT_N_COMPONENTS,
            eigenvalue_floor=DEFAULT_EIGENVALUE_FLOOR, rng=np.random.RandomState(stream),
            dtype=torch.float32)
        return ms.order_statistic(errors, shuffled), paired_t(shuffled.mean(0), errors, flat=0.0)

    for label, pairs in ((f"one draw, {streams} streams", [(0, s) for s in range(streams)]),
                         (f"{draws} draws", [(100 + d, d) for d in range(draws)])):
        stat, t = np.array([both(*p) for p in pairs]).T
        print(f"{label}: statistic mean {stat.mean():.2f} sd {stat.std():.2f}, above "
              f"{ms.MIN_T_ORDER:g}: {(stat > ms.MIN_T_ORDER).sum()}; paired t mean {t.mean():.2f} "
              f"sd {t.std():.2f}, above 2: {(t > 2).sum()} of {len(pairs)}")


def table(path):
    recs = [json.loads(line) for line in open(path)]
    keys = list(dict.fromkeys((r["row"], r["framing"]) for r in recs))
    seeds = sorted({r["seed"] for r in recs})
    lines = ["| row | framing | " + " | ".join(f"seed {s}: rule -> kept (t)" for s in seeds)
             + " |", "|---|---|" + "---|" * len(seeds)]
    for key in keys:
        cells = []
        for s in seeds:
            r = next((r for r in recs if (r["row"], r["framing"]) == key and r["seed"] == s), None)
            if r is None:
                cells.append("")
                continue
            taken = f"{r['window']}:{r['dilation']}" if r["window"] > 1 else "1"
            if r["t"] is None:
                cells.append(taken)
            else:
                kept = taken if r["kept"] > 1 else "1"
                cells.append(f"{taken} -> {kept} ({r['t']:.1f})")
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="*", default=SUITE)
    ap.add_argument("--tasks", nargs="*", default=TASKS)
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument("--out")
    ap.add_argument("--table")
    ap.add_argument("--null", action="store_true", help="the statistic on exchangeable sets")
    ap.add_argument("--copies", type=int, default=ms.ORDER_SHUFFLES,
                    help="shuffled copies of the networks' test (ORDER_SHUFFLES)")
    args = ap.parse_args()
    ms.ORDER_SHUFFLES = args.copies  # read by select_window at each call
    if args.null:
        null()
        return
    if args.table:
        print(table(args.table))
        return
    for seed in args.seeds:
        for name, framing, X, y in rows(args.datasets, args.tasks, seed):
            t0 = time.perf_counter()
            w, d, t, kept = rule(X, y, seed)
            rec = dict(row=name, framing=framing, seed=seed, window=int(w), dilation=int(d),
                       t=t, kept=int(kept), time_s=round(time.perf_counter() - t0, 2))
            emit(rec, args.out)


if __name__ == "__main__":
    main()
