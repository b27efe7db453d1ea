"""``ABCClusterer`` on instances of a few elements: the scikit-learn digits 0-5 as the training
pool, instances of 2-3 unseen digits (6-9) of ``--sizes`` elements as the test, mean adjusted Rand
index of ``predict`` over 100 test instances, short fits (``max_steps=400``).

    OMP_NUM_THREADS=1 python benchmarks/bench_abc_small_instances.py --similarity knn --seeds 0 1 2 3

Run from two checkouts (``PYTHONPATH``) to compare a change of the kNN prior side by side: the
first instances of 8-12 elements made every element every other's neighbour. Results:
``results/abc.md``, "Instances of a few elements".
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.metrics import adjusted_rand_score  # noqa: E402

import skset  # noqa: E402
from skset.datasets import sample_clustering_instances  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--similarity", default="auto", help="ABCClusterer's input_similarity")
    ap.add_argument("--sizes", type=int, nargs="+", default=[8, 12, 20])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--max-steps", type=int, default=400)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    X, y = load_digits(return_X_y=True)
    seen = y < 6
    print("| elements | seed | prior | kernel kept | mean ARI | fit + predict (s) |")
    print("|---:|---:|---|---|---:|---:|")
    for size in args.sizes:
        aris = []
        for seed in args.seeds:
            t = time.perf_counter()
            abc = skset.ABCClusterer(input_similarity=args.similarity, instance_size=size,
                                     max_steps=args.max_steps, eval_every=50, random_state=seed)
            abc.fit(X[seen], y[seen])
            Xt, yt = sample_clustering_instances(X[~seen], y[~seen], 100, size, (2, 3),
                                                 random_state=seed + 10)
            labels = abc.predict(Xt)
            aris.append(np.mean([adjusted_rand_score(a, b) for a, b in zip(yt, labels)]))
            print(f"| {size} | {seed} | {abc.input_similarity_} | {abc.kernel_mix_} | "
                  f"{aris[-1]:.3f} | {time.perf_counter() - t:.1f} |", flush=True)
        print(f"| {size} | mean | | | **{np.mean(aris):.3f}** | |", flush=True)


if __name__ == "__main__":
    main()
