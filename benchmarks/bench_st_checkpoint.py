"""The Set Transformer's lowest-loss checkpoint on one data set and seed: the epoch of lowest
recorded training loss, and the training loss and test score of the candidates the checkpoint
measures (the weights at the start and at the end of that epoch, the last weights), each from a
fit of the same draws stopped there with its last weights, then what the default fit keeps.

    OMP_NUM_THREADS=1 python benchmarks/bench_st_checkpoint.py ItalyPowerDemand --seed 0

Data from ``suite_data.py`` (the ``set`` framing). Results: ``results/trained_vs_pooling.md``.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from bench_suite import score  # noqa: E402
from sklearn.metrics import log_loss  # noqa: E402
from suite_data import load  # noqa: E402

from skset import SetTransformerClassifier  # noqa: E402
from skset.neural_network._callbacks import LowestLossCheckpoint  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    X_tr, X_te, y_tr, y_te = load(args.dataset)
    est = SetTransformerClassifier(random_state=args.seed).fit(X_tr, y_tr)
    curve = np.asarray(est.loss_curve_)
    best = int(curve.argmin())
    print(f"{args.dataset}, seed {args.seed}: {len(curve)} epochs, lowest recorded loss "
          f"{curve[best]:.3f} at epoch {best + 1}")
    kept = LowestLossCheckpoint.on_train_end
    LowestLossCheckpoint.on_train_end = lambda self, state: None  # fits end with their last weights
    try:
        rows = [(f"start of epoch {best + 1}", best), (f"end of epoch {best + 1}", best + 1),
                ("last weights", len(curve))]
        for name, epochs in rows:
            if epochs < 1:
                print(f"  {name}: the initial weights (not fitted here)")
                continue
            m = SetTransformerClassifier(random_state=args.seed, max_iter=epochs).fit(X_tr, y_tr)
            print(f"  {name}: training loss {log_loss(y_tr, m.predict_proba(X_tr)):.3f}, "
                  f"test {100 * score(m, X_te, y_te, args.dataset):.1f}")
    finally:
        LowestLossCheckpoint.on_train_end = kept
    print(f"  kept by the default fit: training loss {log_loss(y_tr, est.predict_proba(X_tr)):.3f}, "
          f"test {100 * score(est, X_te, y_te, args.dataset):.1f}")


if __name__ == "__main__":
    main()
