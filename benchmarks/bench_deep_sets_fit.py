"""One default Deep Sets fit on Japanese Vowels, for whole-process A/B timing of two trees.

``python benchmarks/bench_deep_sets_fit.py [--root DIR]`` imports skset from ``DIR`` (a checkout or
``git archive <commit> skset`` unpacked there; default: this tree), fits
``DeepSetsClassifier(max_iter=40, n_iter_no_change=1000)`` on the 270 training sets on one thread
and prints the training accuracy. Timed by an outside runner, e.g. ``farm-bench -n 5 --vs
"python benchmarks/bench_deep_sets_fit.py --root /tmp/old" -- python
benchmarks/bench_deep_sets_fit.py``.
"""

import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OMP_NUM_THREADS", "1")

if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), os.pardir),
                    help="directory holding the skset package to import")
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.root))
    import warnings

    from skset import DeepSetsClassifier
    from skset.datasets import load_japanese_vowels

    warnings.filterwarnings("ignore")
    X, y = load_japanese_vowels(subset="train", return_X_y=True)
    m = DeepSetsClassifier(max_iter=40, n_iter_no_change=1000, random_state=0).fit(X, y)
    print(m.score(X, y))
