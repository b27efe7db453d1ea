"""Fit every public estimator on a GPU and write pickles + skset.save files, then (on any machine,
e.g. a CPU-only one) load them and compare predictions with the ones recorded at fit time.

    python benchmarks/persist_gpu_check.py write DIR     # on the GPU machine
    python benchmarks/persist_gpu_check.py check DIR     # anywhere
"""

import argparse
import os
import pickle
import warnings

import numpy as np
import torch
from sklearn.base import is_classifier, is_regressor

import skset

NN = dict(hidden_size=8, n_layers=1, max_iter=2, batch_size=8, random_state=0)
ESTIMATORS = {
    "nystrom": lambda: skset.NystromFeatures(n_components=6, random_state=0),
    "otk": lambda: skset.OTKEmbedding(n_supports=3, n_references=2, random_state=0),
    "stc": lambda: skset.SetTransformerClassifier(n_heads=2, n_inducing=3, **NN),
    "str": lambda: skset.SetTransformerRegressor(n_heads=2, norm="set", residual="clean", **NN),
    "dsc": lambda: skset.DeepSetsClassifier(**NN),
    "dsr": lambda: skset.DeepSetsRegressor(**NN),
    "otc": lambda: skset.OTKClassifier(n_components=6, n_supports=3, max_iter=2, random_state=0),
    "otr": lambda: skset.OTKRegressor(n_components=6, n_supports=3, max_iter=2, random_state=0),
}


def data():
    rng = np.random.default_rng(0)
    X = [rng.normal(loc=i % 2, size=(int(rng.integers(3, 10)), 3)) for i in range(30)]
    return X, np.arange(30) % 2


def outputs(est, X):
    if is_classifier(est):
        return est.predict_proba(X)
    if is_regressor(est):
        return est.predict(X)
    out = est.transform(X)
    return np.concatenate(list(out)) if isinstance(out, list) else out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["write", "check"])
    ap.add_argument("dir")
    a = ap.parse_args()
    X, y = data()
    warnings.simplefilter("ignore", category=Warning)
    for name, make in ESTIMATORS.items():
        if a.mode == "write":
            est = make()
            est.fit(X, y + 0.5 if is_regressor(est) else y)
            print(name, "fitted on", est.device_)
            np.save(os.path.join(a.dir, f"{name}.npy"), outputs(est, X))
            with open(os.path.join(a.dir, f"{name}.pkl"), "wb") as f:
                pickle.dump(est, f)
            skset.save(est, os.path.join(a.dir, f"{name}.skset"))
        else:
            ref = np.load(os.path.join(a.dir, f"{name}.npy"))
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                with open(os.path.join(a.dir, f"{name}.pkl"), "rb") as f:
                    p = pickle.load(f)
                s = skset.load(os.path.join(a.dir, f"{name}.skset"))
            msgs = {str(x.message)[:60] for x in w if "CPU" in str(x.message)}
            dp = np.abs(outputs(p, X) - ref).max()
            ds = np.abs(outputs(s, X) - ref).max()
            print(f"{name}: pickle on {p.device_} max|diff| {dp:.2e}; skset.load on {s.device_} "
                  f"max|diff| {ds:.2e}; warnings: {sorted(msgs)}")


if __name__ == "__main__":
    torch.set_num_threads(2)
    main()
