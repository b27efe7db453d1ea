"""The k-mer spectrum of the suite's DNA set at each k, with and without the per-k-mer scaling.

The suite's ``kmer_spectrum`` row chooses k by cross-validation; this prints every k's test
accuracy on GeneFamilies, so that the spectrum can be compared with skset's maps at an equal number
of features (k = 5: 1,024 k-mers, the size of a ``NystromFeatures(n_components=1024)`` map).
Each sequence's k-mer counts (``CountVectorizer`` on the bases as letters) as frequencies, then
``StandardScaler(with_mean=False)`` + ``LogisticRegression()`` (the suite row's model), or the
frequencies unscaled + ``LogisticRegression(C=100)``.

``--gaussian K``: the exact Gaussian kernel map of K-mers instead of the exact-match one, mean
pooled: every one of the 4^K possible K-mers is an anchor, so nothing is approximated. On one-hot
K-mers scaled to unit norm, ``exp(-||x - x'||^2 / (2 sigma^2))`` is ``exp(-m / (K sigma^2))`` for
K-mers m bases apart, and the mean-pooled Nystrom features of a sequence are its K-mer
frequencies times the square root of that kernel matrix; then ``StandardScaler()`` +
``LogisticRegression()``, or unscaled with ``C=100``. Printed for several bandwidths sigma
(``NystromFeatures``' chosen map on these 6-mers, standardised and normalised, has 0.515).

    cd benchmarks && python bench_kmer_spectrum_k.py
    cd benchmarks && python bench_kmer_spectrum_k.py --gaussian 6
"""

import argparse
import itertools
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
from sklearn.feature_extraction.text import CountVectorizer  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import Normalizer, StandardScaler  # noqa: E402
from suite_data import load  # noqa: E402


def letters(X):
    return ["".join(np.array(list("ACGT"))[x.argmax(1)]) for x in X]


def frequencies(seqs, k):
    """Each sequence's frequencies of the 4^k k-mers, in ``itertools.product`` order."""
    vocab = {"".join(p): i for i, p in enumerate(itertools.product("ACGT", repeat=k))}
    counts = CountVectorizer(analyzer="char", lowercase=False, ngram_range=(k, k), vocabulary=vocab)
    return Normalizer(norm="l1").fit_transform(counts.transform(seqs)).toarray(), list(vocab)


def gaussian(a, b, y_tr, y_te, k, sigmas=(0.1, 0.3, 0.5, 0.7)):
    F_tr, vocab = frequencies(a, k)
    F_te, _ = frequencies(b, k)
    codes = np.array([["ACGT".index(c) for c in v] for v in vocab])
    mismatches = (codes[:, None, :] != codes[None, :, :]).sum(-1)
    print(f"| sigma | weight of one mismatch | exact Gaussian map of {k}-mers, mean pooled, scaled "
          "| unscaled (C=100) |")
    print("|---:|---:|---:|---:|")
    for sigma in sigmas:
        w, V = np.linalg.eigh(np.exp(-mismatches / (k * sigma ** 2)))
        root = (V * np.sqrt(np.clip(w, 0, None))) @ V.T
        A, B = F_tr @ root, F_te @ root
        row = []
        for scaled in (True, False):
            A2, B2 = A, B
            if scaled:
                s = StandardScaler().fit(A)
                A2, B2 = s.transform(A), s.transform(B)
            clf = LogisticRegression(max_iter=2000, C=1.0 if scaled else 100.0).fit(A2, y_tr)
            row.append(100 * clf.score(B2, y_te))
        print(f"| {sigma} | {np.exp(-1 / (k * sigma ** 2)):.3f} | {row[0]:.1f} | {row[1]:.1f} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gaussian", type=int, default=None, metavar="K")
    args = parser.parse_args()
    X_tr, X_te, y_tr, y_te = load("GeneFamilies")
    a, b = letters(X_tr), letters(X_te)
    if args.gaussian:
        gaussian(a, b, y_tr, y_te, args.gaussian)
        return
    print("| k | distinct k-mers (training) | scaled | unscaled (C=100) |")
    print("|---:|---:|---:|---:|")
    for k in range(3, 9):
        row = []
        for scaled in (True, False):
            steps = [("kmers", CountVectorizer(analyzer="char", lowercase=False, ngram_range=(k, k))),
                     ("freq", Normalizer(norm="l1"))]
            if scaled:
                steps.append(("scale", StandardScaler(with_mean=False)))
            steps.append(("clf", LogisticRegression(max_iter=2000, C=1.0 if scaled else 100.0)))
            model = Pipeline(steps).fit(a, y_tr)
            row.append(100 * model.score(b, y_te))
        n = len(model.named_steps["kmers"].vocabulary_)
        print(f"| {k} | {n:,} | {row[0]:.1f} | {row[1]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
