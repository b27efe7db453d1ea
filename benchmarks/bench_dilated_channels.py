"""The transform of ``DilatedKernelFeatures`` on series of several channels (Japanese Vowels, 12
channels: fitted on the 270 training utterances, the 370 test utterances transformed 15 times
after one warm-up call, one thread), for the checkout given (``--root``, a directory holding a
``skset`` package) so that two versions can be timed side by side:

    for r in /tmp/old . /tmp/old .; do
        OMP_NUM_THREADS=1 python benchmarks/bench_dilated_channels.py --root $r
    done

``--dtype float64`` times a float64 model. Results: ``results/dilated_kernels.md``, "Channel
sums in float64" and "Float64 channels added one by one".
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=".", help="checkout whose skset is timed")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.root))
    import torch

    from skset import DilatedKernelFeatures
    from skset.datasets import load_japanese_vowels

    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    X, _ = load_japanese_vowels(return_X_y=True)
    Xt, _ = load_japanese_vowels(subset="test", return_X_y=True)
    f = DilatedKernelFeatures(random_state=0, dtype=args.dtype).fit(X)
    f.transform(Xt)
    t = time.perf_counter()
    for _ in range(args.repeats):
        f.transform(Xt)
    print(f"{os.path.abspath(args.root)} ({args.dtype}): transform of 370 sets x{args.repeats} "
          f"{time.perf_counter() - t:.3f} s")


if __name__ == "__main__":
    main()
