"""What choosing the element map costs: the default JapaneseVowels pipeline with ``"auto"`` (the
map, the k-mer width and the positions chosen from the data) against the same pipeline with them
given explicitly (``--fixed map``: the fixed map and ``window=1``; ``--fixed window``:
``window=1`` only, the cost of the k-mer width's rule; ``--fixed positions``:
``OTKEmbedding(position_sigma=None)`` only; ``--fixed order``: both rules that read the order
of the elements, ``window=1`` and ``position_sigma=None``; ``--fixed all``: the three).

Interleaved runs (auto, fixed, auto, fixed, ...) in one process, the median of each and the
median of the pair-by-pair ratios; then the README main job (the grid search of
``examples/japanese_vowels_otk.py``, where the map is chosen again in every fold) once each way.

    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python benchmarks/bench_map_choice.py --repeats 21 \
        [--fixed window|positions|order|all]
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402
from skset._map_selection import DEFAULT_CHOICE  # noqa: E402
from skset.datasets import load_japanese_vowels  # noqa: E402

# what the fixed pipeline gives explicitly: (NystromFeatures, OTKEmbedding) parameters
FIXED = {"map": ({**DEFAULT_CHOICE, "window": 1}, {}), "window": ({"window": 1}, {}),
         "positions": ({}, {"position_sigma": None}),
         "order": ({"window": 1}, {"position_sigma": None}),
         "all": ({**DEFAULT_CHOICE, "window": 1}, {"position_sigma": None})}
WHAT = "map"


def pipeline(fixed: bool, max_iter=1000):
    nys_p, otk_p = FIXED[WHAT] if fixed else ({}, {})
    return Pipeline([("nystrom", NystromFeatures(random_state=0, **nys_p)),
                     ("otk", OTKEmbedding(random_state=0, **otk_p)),
                     ("clf", LogisticRegression(max_iter=max_iter))])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--no-grid", action="store_true")
    ap.add_argument("--fixed", choices=sorted(FIXED), default="map",
                    help="what the fixed pipeline gives explicitly")
    args = ap.parse_args()
    global WHAT
    WHAT = args.fixed
    warnings.filterwarnings("ignore")
    X, y = load_japanese_vowels(subset="train", return_X_y=True)
    Xt, yt = load_japanese_vowels(subset="test", return_X_y=True)
    times = {True: [], False: []}
    for fixed in (True, False):  # warm-up
        pipeline(fixed).fit(X, y)
    for _ in range(args.repeats):
        for fixed in (False, True):
            t = time.perf_counter()
            pipeline(fixed).fit(X, y)
            times[fixed].append(time.perf_counter() - t)
    ratio = np.median(np.array(times[False]) / np.array(times[True]))
    print(f"pipeline fit, median of {args.repeats}: auto {np.median(times[False]):.3f} s, fixed "
          f"{np.median(times[True]):.3f} s, ratio (pair by pair) {ratio:.2f}")
    fitted = pipeline(False).fit(X, y)
    nys, otk = fitted.named_steps["nystrom"], fitted.named_steps["otk"]
    t = time.perf_counter()
    for _ in range(args.repeats):
        NystromFeatures(random_state=0).fit(X, y)
    t_auto = (time.perf_counter() - t) / args.repeats
    t = time.perf_counter()
    for _ in range(args.repeats):
        NystromFeatures(random_state=0, **FIXED[WHAT][0]).fit(X, y)
    t_fixed = (time.perf_counter() - t) / args.repeats
    print(f"NystromFeatures.fit alone: auto {t_auto:.3f} s, fixed {t_fixed:.3f} s; choice: "
          f"standardize={nys.standardize_}, normalize={nys.normalize_}, keep_norm={nys.keep_norm_},"
          f" bandwidth {nys.relative_bandwidth_}, window {nys.window_}, position_sigma "
          f"{otk.position_sigma_}")
    if not args.no_grid:
        for fixed in (False, True):
            search = GridSearchCV(pipeline(fixed, 2000), {"otk__epsilon": [0.1, 0.5, 1.0],
                                                          "otk__n_supports": [5, 10, 20]}, cv=3)
            t = time.perf_counter()
            search.fit(X, y)
            acc = search.score(Xt, yt)
            print(f"README main job ({'fixed' if fixed else 'auto'}): grid search + refit "
                  f"{time.perf_counter() - t:.1f} s, test accuracy {acc:.4f}")


if __name__ == "__main__":
    main()
