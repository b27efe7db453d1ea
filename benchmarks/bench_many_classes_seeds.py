"""Test accuracy and fit time of the default OTKClassifier on the SCOP-shaped task, over seeds.

The data of ``bench_many_classes.py`` (``make_scop_like``) with ``--max-train 5 --max-size 300``
sizes; one fit per seed and epoch count, on the seed's own data. Run it at two commits to
compare how they train (one line per fit: seed, epochs, fit seconds, top-1/5/10):

    PYTHONPATH=$PWD OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_many_classes_seeds.py \
        --seeds 0 1 2 --epochs 3
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from bench_many_classes import make_scop_like, topk  # noqa: E402

from skset import OTKClassifier  # noqa: E402

warnings.filterwarnings("ignore")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument("--epochs", nargs="*", type=int, default=[3])
    ap.add_argument("--n-classes", type=int, default=1000)
    args = ap.parse_args()
    for seed in args.seeds:
        Xtr, ytr, Xte, yte, _ = make_scop_like(args.n_classes, 5, 2, 20, 300, random_state=seed)
        # a small fit first: the one-time import of torch's compiler stack is paid here
        OTKClassifier(max_iter=1, random_state=0).fit(Xtr[:40], np.arange(40) % 4)
        for epochs in args.epochs:
            clf = OTKClassifier(max_iter=epochs, random_state=seed)
            t = time.perf_counter()
            clf.fit(Xtr, ytr)
            fit_s = time.perf_counter() - t
            acc = topk(yte, clf.predict_proba(Xte), clf.classes_)
            print(f"seed {seed}, {epochs} epochs: fit {fit_s:.1f} s, top-1/5/10 "
                  f"{' / '.join(f'{100 * a:.1f}' for a in acc)}", flush=True)


if __name__ == "__main__":
    main()
