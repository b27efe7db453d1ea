"""Japanese Vowels accuracy: the OTK pipeline of the README beside mean pooling, over seeds.

Both use the same per-frame features (``NystromFeatures()`` with default arguments) and the same
classifier (``LogisticRegression(max_iter=2000)``); OTK is the three-step pipeline tuned by
``GridSearchCV`` over ``epsilon`` and ``n_supports`` exactly as in the README, mean pooling averages
the features of each utterance (centred and scaled like OTKEmbedding's output).

    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_japanese_vowels.py --seeds 0 1 2
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.base import BaseEstimator, TransformerMixin  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402
from skset.datasets import load_japanese_vowels  # noqa: E402


class MeanPooling(TransformerMixin, BaseEstimator):
    """Mean of each set's elements, centred and scaled to norm sqrt(d) like OTKEmbedding."""

    def fit(self, X, y=None):
        self.mean_ = np.stack([x.mean(0) for x in X]).mean(0)
        return self

    def transform(self, X):
        Z = np.stack([x.mean(0) for x in X]) - self.mean_
        return Z * np.sqrt(Z.shape[1]) / np.linalg.norm(Z, axis=1, keepdims=True)


def run(seed: int, nystrom_params: dict):
    X_train, y_train = load_japanese_vowels(subset="train", return_X_y=True)
    X_test, y_test = load_japanese_vowels(subset="test", return_X_y=True)
    out = {}
    t = time.perf_counter()
    pipe = Pipeline([("nystrom", NystromFeatures(random_state=seed, **nystrom_params)),
                     ("otk", OTKEmbedding(random_state=seed)),
                     ("clf", LogisticRegression(max_iter=2000))])
    search = GridSearchCV(pipe, {"otk__epsilon": [0.1, 0.5, 1.0], "otk__n_supports": [5, 10, 20]},
                          cv=3).fit(X_train, y_train)
    out["otk"] = (search.score(X_test, y_test), search.best_score_, search.best_params_,
                  time.perf_counter() - t)
    t = time.perf_counter()
    mean = Pipeline([("nystrom", NystromFeatures(random_state=seed, **nystrom_params)),
                     ("pool", MeanPooling()), ("clf", LogisticRegression(max_iter=2000))])
    mean.fit(X_train, y_train)
    out["mean"] = (mean.score(X_test, y_test), None, None, time.perf_counter() - t)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--nystrom-params", type=json.loads, default={},
                        help='JSON dict of NystromFeatures arguments, e.g. \'{"bandwidth": 0.6}\'')
    args = parser.parse_args()
    torch.set_num_threads(2)
    rows = {"otk": [], "mean": []}
    for seed in args.seeds:
        res = run(seed, args.nystrom_params)
        for k, (acc, cv, params, secs) in res.items():
            rows[k].append(acc)
            print(f"seed {seed} {k:5s} test {100 * acc:.2f}%"
                  + (f"  cv {100 * cv:.2f}%  {params}" if cv is not None else "")
                  + f"  {secs:.1f} s", flush=True)
    for k, accs in rows.items():
        a = 100 * np.array(accs)
        print(f"{k:5s}: {a.mean():.2f} +- {a.std():.2f} % over seeds {args.seeds}")


if __name__ == "__main__":
    main()
