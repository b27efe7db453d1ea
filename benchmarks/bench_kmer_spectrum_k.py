"""The k-mer spectrum of the suite's DNA set at each k, with and without the per-k-mer scaling.

The suite's ``kmer_spectrum`` row chooses k by cross-validation; this prints every k's test
accuracy on GeneFamilies, so that the spectrum can be compared with skset's maps at an equal number
of features (k = 5: 1,024 k-mers, the size of a ``NystromFeatures(n_components=1024)`` map).
Each sequence's k-mer counts (``CountVectorizer`` on the bases as letters) as frequencies, then
``StandardScaler(with_mean=False)`` + ``LogisticRegression()`` (the suite row's model), or the
frequencies unscaled + ``LogisticRegression(C=100)``.

    cd benchmarks && python bench_kmer_spectrum_k.py
"""

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


def main():
    X_tr, X_te, y_tr, y_te = load("GeneFamilies")
    a, b = letters(X_tr), letters(X_te)
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
