"""Offline study of ABC's ``input_similarity="auto"`` prior choice (issue 25).

For a model fitted by ``bench_abc_seeds.py`` (its pickle in ``results/abc_seeds_models/``), every
candidate prior alone is scored on the fit's own calibration instances (the same stream as the
fit: ``CALIBRATION_FACTOR * 64`` instances of every training class): the ARI with its calibrated
k rule and with the true k; beside it, its NMI on 100 instances of each test draw (eigengap and
true k). Then the paired t statistic of the best RBF candidate against the best kNN graph, on
the mean of both ARIs (the rule ``choose_prior`` applies) and on the calibrated ARI alone.

    OMP_NUM_THREADS=1 python benchmarks/bench_abc_seeds.py digits mnist --set max_steps=40000 \
        --tag _s5 --no-baselines
    OMP_NUM_THREADS=1 python benchmarks/bench_abc_priors.py digits 1 --model-tag _s5_max_steps40000
"""

from __future__ import annotations

import argparse
import copy
import os
import pickle
import sys
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_abc_seeds as B  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from skset._stats import paired_t  # noqa: E402
from skset.cluster._abc_data import CALIBRATION_FACTOR, held_out_batches, sample_instances  # noqa: E402
from skset.cluster._abc_select import (  # noqa: E402
    MIXES,
    calibrated_scores,
    prior_candidates,
    prior_name,
    set_prior,
)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("task", choices=["digits", "mnist"])
    ap.add_argument("seed", type=int)
    ap.add_argument("--model-tag", default="", help="suffix of the pickled model's file name")
    args = ap.parse_args()
    torch.set_num_threads(1)
    with open(B.MODELS / f"{args.task}_seed{args.seed}{args.model_tag}.pkl", "rb") as f:
        abc = pickle.load(f)
    X, y, _ = B.train_data(args.task, args.seed)
    by_class = [np.flatnonzero(y == c) for c in np.unique(y)]
    cal = sample_instances(np.random.RandomState(args.seed + 1), X, by_class,
                           CALIBRATION_FACTOR * 64, B.POINTS, abc.min_clusters_, abc.max_clusters_)
    parts = held_out_batches(cal, abc._scale, abc.device_, abc.max_pairs)
    net = abc.module_.eval()
    net.mix.copy_(torch.tensor(MIXES["prior"]))
    tests = [B.test_draw(args.task, d, 100) for d in (0, 1)]
    found, both = {}, {}
    for cand in prior_candidates(abc.n_neighbors):
        set_prior(net, *cand)
        with torch.no_grad():
            cs, exact, thr, _ = calibrated_scores(net, parts, abc._k_rule(), args.seed,
                                                  abc.device_, true_k=True)
        found[cand], both[cand] = cs, 0.5 * (cs + exact)
        model = copy.deepcopy(abc)
        model.eigen_threshold_ = thr
        row = []
        for Xt, yt in tests:
            kt = np.array([len(np.unique(v)) for v in yt])
            row += [B._mean(B.nmi, yt, model.predict(Xt)),
                    B._mean(B.nmi, yt, model.predict(Xt, n_clusters=kt))]
        print(f"{prior_name(cand):28s} calibrated ARI {cs.mean():.3f}, true-k ARI "
              f"{exact.mean():.3f} | test NMI eigengap {row[0]:.3f} {row[2]:.3f}, true k "
              f"{row[1]:.3f} {row[3]:.3f}", flush=True)
    for label, sc in (("mean of both ARIs", both), ("calibrated ARI alone", found)):
        best = {kind: max((c for c in sc if c[0] == kind), key=lambda c: sc[c].mean())
                for kind in ("knn", "rbf")}
        print(f"{label}: best kNN {prior_name(best['knn'])} {sc[best['knn']].mean():.3f}, best "
              f"RBF {prior_name(best['rbf'])} {sc[best['rbf']].mean():.3f}, paired t "
              f"{paired_t(sc[best['rbf']], sc[best['knn']]):.2f}")


if __name__ == "__main__":
    main()
