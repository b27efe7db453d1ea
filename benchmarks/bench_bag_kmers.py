"""What the k-mers ``NystromFeatures(window="auto")`` takes on unordered bags are, and what they
cost: the order test's statistic with more shuffled copies, and the default pipeline's accuracy
with those k-mers against single elements.

``--order`` (one JSON line per fit): the width rule run as ``NystromFeatures.fit`` runs it (its
own random stream, the pipeline's incumbent map ``DEFAULT_CHOICE`` and, on the suite, the
supervised models' ``PAPER_MAP`` too); where it takes k-mers, the order test's
``order_statistic`` computed on ``COPIES`` shuffled copies (default 19) and on their first 5
(the test's ``ORDER_SHUFFLES``) and 10. The statistic never changes the choice here. Sources:
``suite`` (suite data sets and seeds), ``null`` (``bench_window_null.py``'s draws: 40-200 sets of
60-300 i.i.d. elements), ``rule`` (``bench_window_rule.py``'s draws: 10-60 elements).

``--accuracy`` FILE (one JSON line per draw of FILE, a ``--order`` output of ``null`` or
``rule``, that took k-mers): 3-fold cross-validated accuracy of ``NystromFeatures`` (the k-mers
taken, or ``window=1``) + ``OTKEmbedding`` + ``LogisticRegression`` on the draw's bags.

    cd benchmarks
    export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1
    python bench_bag_kmers.py --order suite --datasets WatchMagnitude PickupGestureWiimoteZ \
        --seeds 0 1 2 3 4 5 6 7 8 > results/bag_kmers_suite.jsonl
    python bench_bag_kmers.py --order null --draws 200 > results/bag_kmers_null.jsonl
    python bench_bag_kmers.py --order rule --draws 400 > results/bag_kmers_rule.jsonl
    python bench_bag_kmers.py --accuracy results/bag_kmers_null.jsonl > results/bag_kmers_acc_null.jsonl
    python bench_bag_kmers.py --accuracy results/bag_kmers_rule.jsonl > results/bag_kmers_acc_rule.jsonl
    python bench_bag_kmers.py --table results/bag_kmers_*.jsonl
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from bench_window_choices import chosen  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import StratifiedKFold  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402

import skset._map_selection as ms  # noqa: E402
import skset.kernel_approximation as ka  # noqa: E402
from skset import NystromFeatures, OTKEmbedding  # noqa: E402
from skset._map_selection import DEFAULT_CHOICE  # noqa: E402
from skset.neural_network._otk import PAPER_MAP  # noqa: E402

COPIES = 19
ORDER_STATISTIC, SELECT_WINDOW = ms.order_statistic, ka.select_window
_seen = []


def _recording_statistic(errors, shuffled):
    """The statistic on the first 5, 10 and all copies, recorded; the k-mers always kept."""
    _seen.append([float(ORDER_STATISTIC(errors, shuffled[:k])) for k in (5, 10, len(shuffled))])
    return np.inf


def _with_order_test(*args, **kwargs):
    return SELECT_WINDOW(*args, **{**kwargs, "order_test": True})


def choice_and_statistics(X, y, seed, incumbent):
    """``"window:dilation"`` of the width rule of ``NystromFeatures(random_state=seed)`` and the
    order statistics of its k-mers (``None`` where it keeps single elements)."""
    _seen.clear()
    return chosen(X, y, seed, incumbent), (_seen[-1] if _seen else None)


def draws(source):
    if source == "null":
        from bench_window_null import draw_bags
        return draw_bags
    from bench_window_rule import draw
    return draw


def order(args):
    ms.ORDER_SHUFFLES = COPIES
    ms.order_statistic = _recording_statistic
    ka.select_window = _with_order_test
    if args.order == "suite":
        from suite_data import load
        for name in args.datasets:
            X, _, y, _ = load(name)
            for label, incumbent in (("default", DEFAULT_CHOICE), ("paper", PAPER_MAP)):
                for s in args.seeds:
                    c, st = choice_and_statistics(X, y, s, incumbent)
                    print(json.dumps({"source": "suite", "name": name, "incumbent": label,
                                      "seed": s, "choice": c, "statistics": st}), flush=True)
        return
    draw = draws(args.order)
    for d in range(args.draws):
        c, st = choice_and_statistics(*draw(d), d, DEFAULT_CHOICE)
        print(json.dumps({"source": args.order, "draw": d, "choice": c, "statistics": st}),
              flush=True)


def accuracy(path):
    for line in open(path):
        r = json.loads(line)
        if r["choice"] == "1:1":
            continue
        w, dil = map(int, r["choice"].split(":"))
        X, y = draws(r["source"])(r["draw"])
        y = np.asarray(y)
        scores = {}
        for label, win in (("kmers", w), ("single", 1)):
            fold = []
            for tr, te in StratifiedKFold(3, shuffle=True, random_state=0).split(np.zeros(len(y)), y):
                model = Pipeline([
                    ("nystrom", NystromFeatures(window=win, dilation=dil if win > 1 else 1,
                                                random_state=r["draw"])),
                    ("otk", OTKEmbedding(random_state=r["draw"])),
                    ("clf", LogisticRegression(max_iter=2000))])
                model.fit([X[i] for i in tr], y[tr])
                fold.append(model.score([X[i] for i in te], y[te]))
            scores[label] = float(np.mean(fold))
        print(json.dumps({"source": r["source"], "draw": r["draw"], "choice": r["choice"],
                          **scores}), flush=True)


def table(paths):
    rows = [json.loads(line) for p in paths for line in open(p)]
    for source in ("suite", "null", "rule"):
        taken = [r for r in rows if r["source"] == source and r.get("statistics")]
        for k, label in enumerate(("5 copies", "10 copies", f"{COPIES} copies")):
            s = np.array([r["statistics"][k] for r in taken])
            if source != "suite" and len(s):
                print(f"{source}: k-mers taken at {len(taken)} draws; statistic with {label}: "
                      f"median {np.median(s):.2f}, above 3 at {int((s > 3).sum())}, above 2.2 "
                      f"at {int((s > 2.2).sum())}")
        if source == "suite":
            for r in taken:
                print(f"{r['name']} {r['incumbent']} seed {r['seed']}: {r['choice']} "
                      + " / ".join(f"{v:.2f}" for v in r["statistics"]))
        acc = [r for r in rows if r["source"] == source and "kmers" in r]
        if acc:
            d = np.array([r["kmers"] - r["single"] for r in acc])
            print(f"{source}: accuracy with the k-mers {np.mean([r['kmers'] for r in acc]):.3f}, "
                  f"single elements {np.mean([r['single'] for r in acc]):.3f} over {len(acc)} "
                  f"draws; k-mers higher by more than 2 points at {int((d > 0.02).sum())}, lower "
                  f"at {int((d < -0.02).sum())} (lowest {d.min():+.3f}, highest {d.max():+.3f})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--order", choices=["suite", "null", "rule"])
    ap.add_argument("--accuracy", metavar="FILE")
    ap.add_argument("--table", nargs="+", metavar="FILE")
    ap.add_argument("--datasets", nargs="*", default=["WatchMagnitude", "PickupGestureWiimoteZ"])
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument("--draws", type=int, default=200)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    if args.order:
        order(args)
    elif args.accuracy:
        accuracy(args.accuracy)
    elif args.table:
        table(args.table)


if __name__ == "__main__":
    main()
