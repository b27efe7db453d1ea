"""Whether the k-mer width rule's proxy would see the widths better if it pooled as the pipeline
does: for each contiguous width, the leave-one-out ridge errors (the rule's proxy,
``skset._map_selection.standardized_loo_errors`` on one-hot classes) of every training set's
features, pooled two ways from the same ``NystromFeatures(n_components=64, window=w,
dilation=1)`` map: by the mean (as the rule pools), and by the default ``OTKEmbedding`` (as the
pipeline pools; no positions). Lower is better; compare the ranking with the test accuracies of
the pipeline at each width (``suite.md``).

    cd benchmarks
    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python bench_width_proxy_pooling.py \
        --datasets WatchMagnitude ArrowHead --seeds 0 1 2

One line per data set and seed: each width's mean error under OTK pooling and under mean pooling.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from suite_data import DATASETS, load  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402
from skset._label_tasks import _targets  # noqa: E402
from skset._map_selection import WINDOW_CANDIDATES, standardized_loo_errors  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["WatchMagnitude", "ArrowHead"],
                    choices=DATASETS)
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument("--n-components", type=int, default=64)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    for name in args.datasets:
        X, _, y, _ = load(name)
        target = _targets("classification", np.asarray(y))
        widths = [w for w in WINDOW_CANDIDATES if 2 * w <= min(len(s) for s in X)]
        for seed in args.seeds:
            cells = []
            for w in widths:
                ny = NystromFeatures(n_components=args.n_components, window=w, dilation=1,
                                     random_state=seed).fit(X, y)
                Z = ny.transform(X)
                otk = OTKEmbedding(position_sigma=None, random_state=seed).fit(Z).transform(Z)
                mean = np.stack([z.mean(0) for z in Z])
                cells.append(f"{w}: otk {standardized_loo_errors(otk, target).mean():.4f} "
                             f"mean {standardized_loo_errors(mean, target).mean():.4f}")
            print(name, seed, " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
