"""Fingerprints of every public estimator's fitted outputs, to show that a refactor changes nothing.

Fits each public estimator with fixed seeds on small bundled or synthetic data and prints one
line per setting: the name and a SHA-1 prefix of its outputs (transform, predict, predict_proba,
fitted attributes where they are the result). Run it before and after a change and compare:

    python benchmarks/hash_outputs.py > before.txt
    ...change...
    python benchmarks/hash_outputs.py > after.txt && diff before.txt after.txt

One thread, CPU, float32 (float64 where a setting says so); about a minute on 2 cores.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("SKSET_NUM_THREADS", "1")

import hashlib  # noqa: E402
import io  # noqa: E402
import pickle  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402

import skset  # noqa: E402
from skset.datasets import load_japanese_vowels, make_circles_instances  # noqa: E402

torch.set_num_threads(1)


def digest(*arrays):
    h = hashlib.sha1()
    for a in arrays:
        if isinstance(a, (list, tuple)) and a and not np.isscalar(a[0]):
            h.update(digest(*a).encode())
            continue
        if isinstance(a, torch.Tensor):
            a = a.detach().cpu().numpy()
        a = np.ascontiguousarray(np.asarray(a))
        h.update(str(a.dtype).encode() + str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def report(name, *arrays):
    print(f"{name:48s} {digest(*arrays)}", flush=True)


def outputs(est, X):
    out = []
    for m in ("transform", "predict", "predict_proba", "decision_function"):
        if hasattr(est, m):
            try:
                out.append(getattr(est, m)(X))
            except (AttributeError, NotImplementedError):
                pass
    return out


def main():
    Xtr, ytr = load_japanese_vowels(subset="train", return_X_y=True)
    Xte, _ = load_japanese_vowels(subset="test", return_X_y=True)
    Xtr, ytr, Xte = list(Xtr[:120]), np.asarray(ytr[:120]), list(Xte[:60])
    rng = np.random.default_rng(0)
    yreg = np.array([s[:, 0].mean() for s in Xtr]) + 0.1 * rng.standard_normal(len(Xtr))
    seqs = [rng.standard_normal((n, 1)).astype(np.float32) for n in rng.integers(20, 60, 80)]
    yseq = rng.integers(0, 3, 80)
    ml = np.stack([(yseq == k) | (rng.random(80) < 0.2) for k in range(3)], 1).astype(int)
    S = skset

    settings = [
        ("NystromFeatures", lambda: S.NystromFeatures(random_state=0), Xtr, None),
        ("NystromFeatures window=5", lambda: S.NystromFeatures(window=5, random_state=0), seqs, yseq),
        ("OTKEmbedding", lambda: S.OTKEmbedding(random_state=0), Xtr, None),
        ("OTKEmbedding wasserstein 2 refs", lambda: S.OTKEmbedding(
            fit_method="wasserstein", n_references=2, random_state=0), Xtr, None),
        ("OTKEmbedding position_sigma float64", lambda: S.OTKEmbedding(
            position_sigma=0.1, dtype="float64", random_state=0),
         Xtr, None),
        ("pipeline Nystrom+OTK+LR", lambda: Pipeline([
            ("nys", S.NystromFeatures(random_state=0)), ("otk", S.OTKEmbedding(random_state=0)),
            ("lr", LogisticRegression(max_iter=500))]), Xtr, ytr),
        ("OTKClassifier", lambda: S.OTKClassifier(max_iter=3, random_state=0), Xtr, ytr),
        ("OTKClassifier adam", lambda: S.OTKClassifier(solver="adam", max_iter=3, random_state=0),
         Xtr, ytr),
        ("OTKClassifier window multilabel", lambda: S.OTKClassifier(
            window=4, max_iter=2, random_state=0), seqs, ml),
        ("OTKRegressor", lambda: S.OTKRegressor(max_iter=3, random_state=0), Xtr, yreg),
        ("SetTransformerClassifier", lambda: S.SetTransformerClassifier(
            max_iter=3, random_state=0), Xtr, ytr),
        ("SetTransformerRegressor", lambda: S.SetTransformerRegressor(
            max_iter=3, random_state=0), Xtr, yreg),
        ("DeepSetsClassifier", lambda: S.DeepSetsClassifier(max_iter=3, random_state=0),
         Xtr, ytr),
        ("DeepSetsRegressor", lambda: S.DeepSetsRegressor(max_iter=3, random_state=0),
         Xtr, yreg),
    ]
    only = sys.argv[1:]
    for name, make, X, y in settings:
        if only and not any(o in name for o in only):
            continue
        est = make()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y) if y is not None else est.fit(X)
        Xeval = X if X is seqs else Xte
        outs = outputs(est, Xeval)
        report(name, *outs)
        buf = io.BytesIO()
        pickle.dump(est, buf)
        report(name + " (pickled)", *outputs(pickle.loads(buf.getvalue()), Xeval))
    if not only or any(o in "ABCClusterer" for o in only):
        inst, lab = make_circles_instances(6, 40, n_circles=2, random_state=0)
        abc = S.ABCClusterer(max_steps=20, eval_every=10, instance_size=40, random_state=0,
                             device="cpu").fit(inst, lab)
        report("ABCClusterer", *abc.predict(inst[:2]))
    if not only or any(o in "EigengapSpectralClustering" for o in only):
        pts = np.concatenate([rng.standard_normal((30, 2)) + c for c in ([0, 0], [6, 0], [0, 6])])
        labels = S.EigengapSpectralClustering(random_state=0).fit_predict(pts)
        report("EigengapSpectralClustering", labels)


if __name__ == "__main__":
    main()
