"""The k-mer width and dilation ``window="auto"`` takes on every suite data set, seed and
framing, under both incumbent maps (the pipeline's ``DEFAULT_CHOICE``, the supervised OTK
models' ``PAPER_MAP``): the rule alone, run as ``NystromFeatures.fit`` runs it (its own random
stream), without the fit that follows. Two checkouts' outputs side by side show which fits a
change of the rule touches.

    cd benchmarks
    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python bench_window_choices.py --seeds 0 1 2

``--fit NAME ...``: instead, the whole default ``NystromFeatures(random_state=0).fit`` on each
named data set (nothing printed), a process for ``farm-bench`` to time against another
checkout's:

    farm-bench -n 5 --timeout 600 --vs "env PYTHONPATH=<other checkout> python \
        bench_window_choices.py --fit BasicMotions MNISTBags200 WatchWindows DigitPatches" -- \
        python bench_window_choices.py --fit BasicMotions MNISTBags200 WatchWindows DigitPatches

One line per data set, framing (``set``: the elements as given; ``seq``: the series' k-mers of
``KINDS[name]["window"]`` as the elements) and incumbent: ``window:dilation`` at each seed.

``--scores``: instead, one line per data set (``set`` framing, the pipeline's incumbent) and
seed: the choice and the rule's score of every candidate (``window_scores_``, minus the proxy's
mean leave-one-out error):

    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python bench_window_choices.py --scores \
        --datasets WatchMagnitude --seeds 0 1 2 3 4 5 6 7 8
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from suite_data import DATASETS, KINDS, load  # noqa: E402

from skset import NystromFeatures  # noqa: E402
from skset._map_selection import DEFAULT_CHOICE, format_window_scores  # noqa: E402
from skset._sets import kmer_windows  # noqa: E402
from skset.neural_network._otk import PAPER_MAP  # noqa: E402


def chosen(X, y, seed, incumbent, scores=False):
    """``window:dilation`` of ``NystromFeatures(random_state=seed)``'s rule on ``(X, y)``
    (with ``scores``, followed by every candidate's score)."""
    ny = NystromFeatures(random_state=seed)
    seed, _ = ny._begin_fit()
    ny.window_, ny.dilation_ = 1, 1
    data = ny._training_elements(X, None, None, fitting=True)
    ny._choose_window(data.coll, ny._check_y(y, data.coll),
                      np.random.RandomState((seed + 2) % 2**32), incumbent)
    if scores:
        return f"{ny.window_}:{ny.dilation_} " + format_window_scores(ny.window_scores_ or [])
    return f"{ny.window_}:{ny.dilation_}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="*", default=DATASETS, choices=DATASETS)
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument("--fit", nargs="+", default=None, choices=DATASETS, metavar="NAME",
                    help="only fit NystromFeatures(random_state=0) on these (for farm-bench)")
    ap.add_argument("--scores", action="store_true",
                    help="the choice and every candidate's score, per data set and seed")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    if args.fit:
        for name in args.fit:
            X_tr, _, y, _ = load(name)
            NystromFeatures(random_state=0).fit(X_tr, y)
        return
    if args.scores:
        for name in args.datasets:
            X_tr, _, y, _ = load(name)
            for s in args.seeds:
                print(name, s, chosen(X_tr, y, s, DEFAULT_CHOICE, scores=True), flush=True)
        return
    for name in args.datasets:
        X_tr, _, y, _ = load(name)
        w = KINDS[name]["window"]
        for framing in (["set", "seq"] if w else ["set"]):
            X = kmer_windows(X_tr, w) if framing == "seq" else X_tr
            for label, incumbent in (("default", DEFAULT_CHOICE), ("paper", PAPER_MAP)):
                print(name, framing, label,
                      " ".join(chosen(X, y, s, incumbent) for s in args.seeds), flush=True)


if __name__ == "__main__":
    main()
