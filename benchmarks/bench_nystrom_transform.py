"""``NystromFeatures.transform`` against scikit-learn's ``Nystroem.transform`` at equal work, side
by side in one process, and the transform of the default JapaneseVowels pipeline's Nystrom step.

Equal work: scikit-learn's ``Nystroem`` is given skset's fitted anchors (``components_``) and
inverse square root (``normalization_``), the same Gaussian kernel (``gamma = 1 / (2
bandwidth_^2)``, skset with ``standardize=False``), the same elements, float32 in and out; its
time includes concatenating the sets and splitting its output back per set, which a user of sets
must do. The outputs are compared (largest difference relative to the largest feature). Both run
inside :func:`skset.utils.limit_threads` with the same thread count (torch and the BLAS pools
numpy uses); the rounds interleave the two (medians of ``--repeats``).

Cases (the sets of ``bench_peers.py``'s Nystrom part): 500 long sets of 100..1,000 elements x 64
features, 256 anchors; 2,000 short sets of 20..200 x 32, 128 anchors. JapaneseVowels: the
transform of the 370 test sets by ``NystromFeatures(random_state=0)`` fitted with labels on the
270 training sets (the first step of ``bench_map_choice.py``'s default pipeline).

``--root`` times the skset of another checkout (``git worktree add /tmp/old <commit>``), for
before/after figures::

    OMP_WAIT_POLICY=PASSIVE nice -n 10 python benchmarks/bench_nystrom_transform.py --repeats 7
    OMP_WAIT_POLICY=PASSIVE nice -n 10 python benchmarks/bench_nystrom_transform.py --root /tmp/old
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402

from _timing import interleaved  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=".", help="checkout whose skset is timed")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    ap.add_argument("--quick", action="store_true", help="a tenth of the sets (smoke run)")
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.root))
    import numpy as np
    from sklearn.kernel_approximation import Nystroem

    import skset
    from skset import NystromFeatures
    from skset.datasets import load_japanese_vowels
    from skset.utils import limit_threads

    warnings.filterwarnings("ignore")
    try:
        commit = subprocess.run(["git", "-C", args.root, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip() or "?"
    except OSError:
        commit = "?"
    print(f"skset {os.path.dirname(skset.__file__)} (commit {commit}); args {vars(args)}")
    rng = np.random.default_rng(0)
    cases = []
    for n_sets, lo, hi, d, m in ((500, 100, 1000, 64, 256), (2000, 20, 200, 32, 128)):
        if args.quick:
            n_sets //= 10
        sets = [rng.standard_normal((k, d)).astype(np.float32)
                for k in rng.integers(lo, hi + 1, n_sets)]
        nf = NystromFeatures(n_components=m, standardize=False, random_state=0).fit(sets[:200])
        sk = Nystroem(kernel="rbf", gamma=1.0 / (2 * nf.bandwidth_**2), n_components=m,
                      random_state=0).fit(sets[0])
        sk.components_ = nf.anchors_  # equal work: skset's anchors and normalisation
        sk.normalization_ = nf.normalization_
        cases.append((f"{n_sets} x {lo}..{hi} x {d}, {m} anchors", sets, nf, sk))
    X, y = load_japanese_vowels(subset="train", return_X_y=True)
    Xt, _ = load_japanese_vowels(subset="test", return_X_y=True)
    jv = NystromFeatures(random_state=0).fit(X, y)

    print("| threads | case | skset (s) | scikit-learn (s) | skset x faster | max rel diff |")
    print("|---:|---|---:|---:|---:|---:|")
    for threads in (int(t) for t in args.threads.split(",")):
        with limit_threads(threads):
            for label, sets, nf, sk in cases:
                bounds = np.cumsum([len(s) for s in sets])[:-1]

                def sk_transform(sets=sets, sk=sk, bounds=bounds):
                    return np.split(sk.transform(np.concatenate(sets)), bounds)

                t = interleaved({"skset": lambda nf=nf, sets=sets: nf.transform(sets),
                                 "sklearn": sk_transform}, args.repeats)
                a, b = np.concatenate(nf.transform(sets)), np.concatenate(sk_transform())
                assert a.dtype == b.dtype == np.float32, (a.dtype, b.dtype)
                diff = float(np.abs(a - b).max() / np.abs(b).max())
                print(f"| {threads} | {label} | {t['skset']:.3f} | {t['sklearn']:.3f} | "
                      f"{t['sklearn'] / t['skset']:.2f} | {diff:.1e} |", flush=True)
            reps = max(args.repeats, 7) * 5
            t = interleaved({"jv": lambda: jv.transform(Xt)}, reps)["jv"]
            print(f"| {threads} | JapaneseVowels default map, transform of 370 test sets | "
                  f"{t * 1e3:.2f} ms (median of {reps}) | - | - | - |", flush=True)


if __name__ == "__main__":
    main()
