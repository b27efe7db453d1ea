"""Normal Var: Set Transformer vs ST++ and Deep Sets vs DS++ at the same depth and budget.

Zhang et al. (2022) protocol (Table 3): sets of 1000 samples of N(mu, sigma^2), mu ~ U[-10, 10],
sigma^2 ~ U[0, 10], target the empirical variance; 10,000 training / 1,000 test sets; ST 16 ISAB
layers, DS 50 layers; Adam lr 1e-4, batch 64, 50 epochs; test MSE at the last epoch (ST++ 0.0030,
DS++ 0.0198 in the paper). The defaults here are a scaled protocol that fits in a few minutes on a
2-core CPU (smaller sets, fewer sets, narrower models, fewer epochs, a larger learning rate); pass
--paper for the paper's sizes (GPU).

    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_normal_var.py            # scaled protocol
    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_normal_var.py --quick    # smoke test
    python benchmarks/bench_normal_var.py --paper --device cuda              # paper protocol
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch

from skset import DeepSetsRegressor, SetTransformerRegressor
from skset.datasets import make_normal_var


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--paper", action="store_true", help="the paper's protocol (needs a GPU)")
    ap.add_argument("--n-train", type=int, default=1000)
    ap.add_argument("--n-test", type=int, default=500)
    ap.add_argument("--set-size", type=int, default=100)
    ap.add_argument("--st-layers", type=int, default=16)
    ap.add_argument("--ds-layers", type=int, default=50)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--inducing", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--models", nargs="+", default=["ST", "ST++", "DS", "DS++"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()
    if args.paper:
        args.n_train, args.n_test, args.set_size = 10_000, 1_000, 1000
        args.hidden, args.inducing, args.epochs, args.lr = 128, 16, 50, 1e-4
    if args.quick:
        args.n_train, args.n_test, args.set_size, args.epochs = 100, 50, 20, 2
        args.st_layers, args.ds_layers = 2, 4
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")

    X, y = make_normal_var(args.n_train, set_size=args.set_size, random_state=0)
    Xt, yt = make_normal_var(args.n_test, set_size=args.set_size, random_state=1)
    common = dict(hidden_size=args.hidden, learning_rate_init=args.lr, max_iter=args.epochs,
                  batch_size=64, tol=0.0, n_iter_no_change=args.epochs + 1, device=args.device)
    makers = {
        "ST": lambda s: SetTransformerRegressor(n_layers=args.st_layers, n_heads=4,
                                                n_inducing=args.inducing, norm="layer",
                                                residual="original", random_state=s, **common),
        "ST++": lambda s: SetTransformerRegressor(n_layers=args.st_layers, n_heads=4,
                                                  n_inducing=args.inducing, norm="set",
                                                  residual="clean", random_state=s, **common),
        "DS": lambda s: DeepSetsRegressor(n_layers=args.ds_layers, pooling="sum", norm=None,
                                          residual=None, random_state=s, **common),
        "DS++": lambda s: DeepSetsRegressor(n_layers=args.ds_layers, pooling="sum", norm="set",
                                            residual="clean", random_state=s, **common),
    }
    print(f"protocol: train {args.n_train} sets, test {args.n_test}, set size {args.set_size}, "
          f"hidden {args.hidden}, ST {args.st_layers} ISAB layers ({args.inducing} inducing, "
          f"4 heads), DS {args.ds_layers} layers (sum pooling), Adam lr {args.lr}, batch 64, "
          f"{args.epochs} epochs, seeds {args.seeds}, threads {args.threads}")
    print(f"constant predictor test MSE: {np.mean((yt - y.mean()) ** 2):.4f}")
    for name in args.models:
        mses, times, first_last = [], [], []
        for s in args.seeds:
            t = time.perf_counter()
            est = makers[name](s).fit(X, y)
            times.append(time.perf_counter() - t)
            mses.append(float(np.mean((est.predict(Xt) - yt) ** 2)))
            first_last.append((est.loss_curve_[0], est.loss_curve_[-1]))
        print(f"{name:5s} test MSE {np.mean(mses):.4f} +- {np.std(mses):.4f} "
              f"(per seed {', '.join(f'{m:.4f}' for m in mses)}); train loss first/last epoch "
              f"{', '.join(f'{a:.3f}/{b:.4f}' for a, b in first_last)}; "
              f"fit {np.mean(times):.0f} s", flush=True)


if __name__ == "__main__":
    main()
