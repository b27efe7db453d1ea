"""Every cell of the suite's grid (``bench_suite.GRID``: epsilon x n_supports x C), read on the
test set, for one data set and framing and seeds 0-2: a diagnostic of which parameter a row's
shortfall from its grid search comes from (issue 23), not a model selection.

    OMP_NUM_THREADS=1 python benchmarks/bench_suite_grid_cells.py PickupGestureWiimoteZ --framing seq
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from bench_suite import GRID, Framing, clf, score  # noqa: E402

from skset import OTKEmbedding  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("--framing", default="seq", choices=["set", "seq", "pos"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = ap.parse_args()
    torch.set_num_threads(1)
    fr = Framing(args.dataset, args.framing, {}, {}, None)
    res = {}
    for seed in args.seeds:
        F_tr, F_te, _, _ = fr.features(seed)
        for eps, ns in itertools.product(GRID["otk__epsilon"], GRID["otk__n_supports"]):
            otk = OTKEmbedding(random_state=seed, epsilon=eps, n_supports=ns, **fr.otk_p).fit(F_tr)
            Z_tr, Z_te = otk.transform(F_tr), otk.transform(F_te)
            for C in GRID["clf__C"]:
                model = clf().set_params(C=C).fit(Z_tr, fr.y_tr)
                res[(seed, eps, ns, C)] = score(model, Z_te, fr.y_te, args.dataset)
    print(f"{args.dataset} ({args.framing}), test score in %, mean over seeds {args.seeds}:")
    print("epsilon  n_supports  C  score")
    for eps, ns, C in sorted({k[1:] for k in res}):
        m = 100 * np.mean([res[(s, eps, ns, C)] for s in args.seeds])
        print(f"{eps:7g}  {ns:10d}  {C:g}  {m:.1f}")


if __name__ == "__main__":
    main()
