"""
Japanese Vowels: Nystrom features + OTK embedding + logistic regression
=======================================================================

The main job of skset: speaker recognition on the bundled Japanese Vowels data (9 speakers, each
utterance a set of 7-29 frames of 12 LPC coefficients). Each frame is mapped by a Nystrom
approximation of a Gaussian kernel, each utterance is pooled by the optimal transport kernel
embedding against a reference learned by k-means, and a linear model classifies the embeddings.
``GridSearchCV`` tunes the entropic regularisation ``epsilon`` and the number of supports.

Run it with ``python examples/japanese_vowels_otk.py`` (about 9 s on two idle CPU cores, 5 s of
it the grid search and refit; on a busy machine about its one-thread time there, see
``benchmarks/results/threads.md``).
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: no spinning threads

import argparse  # noqa: E402
import time  # noqa: E402

from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402
from skset.datasets import load_japanese_vowels  # noqa: E402


def main(random_state: int = 0, n_jobs: int = 1) -> float:
    X_train, y_train = load_japanese_vowels(subset="train", return_X_y=True)
    X_test, y_test = load_japanese_vowels(subset="test", return_X_y=True)
    print(f"train: {len(X_train)} utterances, test: {len(X_test)}, "
          f"{X_train[0].shape[1]} features per frame")

    pipe = Pipeline([
        ("nystrom", NystromFeatures(random_state=random_state)),
        ("otk", OTKEmbedding(random_state=random_state)),
        ("clf", LogisticRegression(max_iter=2000)),
    ])
    search = GridSearchCV(pipe, {"otk__epsilon": [0.1, 0.5, 1.0], "otk__n_supports": [5, 10, 20]},
                          cv=3, n_jobs=n_jobs)
    start = time.perf_counter()
    search.fit(X_train, y_train)
    accuracy = search.score(X_test, y_test)
    print(f"best parameters: {search.best_params_}")
    print(f"cross-validation accuracy: {search.best_score_:.4f}")
    print(f"test accuracy: {accuracy:.4f}")
    print(f"grid search + refit: {time.perf_counter() - start:.1f} s")
    return accuracy


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--random-state", type=int, default=0)
    parser.add_argument("--n-jobs", type=int, default=1)
    args = parser.parse_args()
    main(args.random_state, args.n_jobs)
