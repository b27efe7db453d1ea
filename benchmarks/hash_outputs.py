"""Fingerprints of every public estimator's fitted outputs, to show that a refactor changes nothing.

Fits each public estimator with fixed seeds on small bundled or synthetic data and prints one
line per setting: the name and a SHA-1 prefix of its outputs (transform, predict, predict_proba,
fitted attributes where they are the result). Run it before and after a change and compare:

    PYTHONPATH=. python benchmarks/hash_outputs.py > before.txt
    ...change...
    PYTHONPATH=. python benchmarks/hash_outputs.py > after.txt && diff before.txt after.txt

(from the repository root: ``PYTHONPATH=.`` makes the checkout's ``skset`` the one imported, not
an installed copy; the first line printed is the path of the package that ran.)

One thread, CPU, float32 (float64 where a setting says so); a few minutes on 2 cores. Besides the
estimators' own methods, the last settings cover the other paths of the OTK engine: each Sinkhorn
solver (``sinkhorn_method``), the compiled kernels (``skset.config_context(compile=True)``; a line
saying so when torch.compile does not work here), the serving modules of ``skset.export`` and
their ONNX graphs run by onnxruntime (skipped, with a line, without onnx). The
``skset.distributed`` settings (``transform`` and ``fit`` on a dask frame and Bag, dask's
synchronous scheduler, and ``transform`` on a one-worker ``LocalCluster(processes=False)``) run
when dask is installed; their outputs are sorted by set id before hashing.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("SKSET_NUM_THREADS", "1")

import hashlib  # noqa: E402
import io  # noqa: E402
import logging  # noqa: E402
import pickle  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402

import skset  # noqa: E402
from skset.datasets import load_japanese_vowels, make_circles_instances  # noqa: E402
from skset.export import export_onnx, pad_sets, run_onnx, serving_module  # noqa: E402

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


def frame_of(sets, labels=None, seed=0):
    """A long pandas frame of ``sets`` (columns f0.., set id ``sid``, position ``t``, optional
    ``label``), its rows shuffled (every set cut over the partitions); and the ids."""
    import pandas as pd

    ids = [f"s{i:03d}" for i in range(len(sets))]
    rows = pd.DataFrame(np.concatenate(sets), columns=[f"f{j}" for j in range(sets[0].shape[1])])
    rows["sid"] = np.repeat(ids, [len(s) for s in sets])
    rows["t"] = np.concatenate([np.arange(len(s)) for s in sets])
    if labels is not None:
        rows["label"] = np.repeat(labels, [len(s) for s in sets])
    return rows.sample(frac=1.0, random_state=seed), ids


def sorted_frame(df):
    """A computed output frame, rows sorted by set id: its index, columns and values."""
    df = df.sort_index()
    return [np.asarray(df.index, dtype=str), np.asarray(df.columns, dtype=str), df.to_numpy()]


def distributed_settings(S, Xtr, ytr, Xte, only):
    """``skset.distributed.transform`` / ``fit`` outputs (skipped without dask)."""
    try:
        import dask
        import dask.bag as db
        import dask.dataframe as dd
        from sklearn.linear_model import SGDClassifier

        import skset.distributed as sd
    except ImportError:
        return
    if only and not any(o in "distributed" for o in only):
        return
    pipe = Pipeline([("nys", S.NystromFeatures(random_state=0)),
                     ("otk", S.OTKEmbedding(random_state=0)),
                     ("lr", LogisticRegression(max_iter=500))]).fit(Xtr, ytr)
    rows, ids = frame_of(Xte)
    cols = [c for c in rows.columns if c.startswith("f")]
    with warnings.catch_warnings(), dask.config.set(scheduler="sync"):
        warnings.simplefilter("ignore")
        ddf = dd.from_pandas(rows, npartitions=3)
        for method in ("predict_proba", "predict", "decision_function"):
            out = sd.transform(pipe, ddf, by="sid", order_by="t", method=method).compute()
            report(f"distributed.transform frame {method}", *sorted_frame(out))
        bag = db.from_sequence(list(zip(ids, Xte)), npartitions=3)
        report("distributed.transform bag transform",
               *sorted_frame(sd.transform(pipe[:2], bag).compute()))
        tr_rows, _ = frame_of(Xtr, ytr, seed=1)
        fitted = sd.fit(Pipeline([("nys", S.NystromFeatures(random_state=0)),
                                  ("otk", S.OTKEmbedding(random_state=0)),
                                  ("sgd", SGDClassifier(loss="log_loss", random_state=0))]),
                        dd.from_pandas(tr_rows, npartitions=3), by="sid", order_by="t",
                        y="label", classes=np.unique(ytr), epochs=2)
        report("distributed.fit frame pipeline", *outputs(fitted, Xte))
        out = sd.transform(fitted, ddf, by="sid", order_by="t", method="predict_proba")
        report("distributed.fit frame pipeline, transform", *sorted_frame(out.compute()))
        triples = db.from_sequence(list(zip(range(len(Xtr)), Xtr, ytr)), npartitions=3)
        otkc = sd.fit(S.OTKClassifier(max_iter=2, random_state=0), triples,
                      classes=np.unique(ytr), epochs=2)
        report("distributed.fit bag OTKClassifier", *outputs(otkc, Xte))
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                          dashboard_address=None, silence_logs=logging.ERROR) as cluster, Client(cluster):
            out = sd.transform(pipe, dd.from_pandas(rows, npartitions=3), by="sid",
                               order_by="t", columns=cols, method="predict_proba").compute()
    report("distributed.transform LocalCluster predict_proba", *sorted_frame(out))


def main():
    print(f"skset from {Path(skset.__file__).parent}", flush=True)
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
    engine_paths(Xtr, ytr, Xte, seqs, yseq, only)
    if not only or any(o in "ABCClusterer" for o in only):
        inst, lab = make_circles_instances(6, 40, n_circles=2, random_state=0)
        abc = S.ABCClusterer(max_steps=20, eval_every=10, instance_size=40, random_state=0,
                             device="cpu").fit(inst, lab)
        report("ABCClusterer", *abc.predict(inst[:2]))
    if not only or any(o in "EigengapSpectralClustering" for o in only):
        pts = np.concatenate([rng.standard_normal((30, 2)) + c for c in ([0, 0], [6, 0], [0, 6])])
        labels = S.EigengapSpectralClustering(random_state=0).fit_predict(pts)
        report("EigengapSpectralClustering", labels)
    distributed_settings(S, Xtr, ytr, Xte, only)


def engine_paths(Xtr, ytr, Xte, seqs, yseq, only):
    """The OTK engine's other paths: Sinkhorn solvers, compiled kernels, serving modules, ONNX."""
    S = skset

    def wanted(name):
        return not only or any(o in name for o in only)

    def fitted(make, X, y=None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return make().fit(X, y) if y is not None else make().fit(X)

    for method in ("log", "exp"):
        name = f"OTKEmbedding sinkhorn_method={method}"
        if wanted(name):
            est = fitted(lambda m=method: S.OTKEmbedding(sinkhorn_method=m, random_state=0), Xtr)
            report(name, est.transform(Xte))
    name = "OTKEmbedding tol=None reg_m=1 exp float64"
    if wanted(name):
        est = fitted(lambda: S.OTKEmbedding(sinkhorn_tol=None, sinkhorn_iter=50, reg_m=1.0,
                                            sinkhorn_method="exp", dtype="float64",
                                            random_state=0), Xtr)
        report(name, est.transform(Xte))
    emb = fitted(lambda: S.OTKEmbedding(random_state=0), Xtr)
    emb_pos = fitted(lambda: S.OTKEmbedding(position_sigma=0.1, n_references=2, reg_m=2.0,
                                            random_state=0), Xtr)
    clf = fitted(lambda: S.OTKClassifier(max_iter=2, random_state=0), Xtr, ytr)
    clf_w = fitted(lambda: S.OTKClassifier(window=4, n_components=0, max_iter=2,
                                           random_state=0), seqs, yseq)
    nys = fitted(lambda: S.NystromFeatures(random_state=0), Xtr)
    if wanted("compiled"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", S.CompileWarning)
            with S.config_context(compile=True):
                outs = [("OTKEmbedding compiled", emb.transform(Xte)),
                        ("OTKEmbedding position reg_m compiled", emb_pos.transform(Xte)),
                        ("OTKClassifier compiled", clf.predict_proba(Xte)),
                        ("OTKClassifier window compiled", clf_w.predict_proba(seqs))]
        if any(issubclass(w.category, S.CompileWarning) for w in caught):
            print("compiled: torch.compile does not work here (eager results)", flush=True)
        for name, out in outs:
            report(name, out)
    serving = [("NystromFeatures", nys, Xte), ("OTKEmbedding", emb, Xte),
               ("OTKEmbedding position reg_m", emb_pos, Xte), ("OTKClassifier", clf, Xte),
               ("OTKClassifier window", clf_w, seqs)]
    for label, est, X in serving:
        for method in ("log", "exp"):
            name = f"serving {label} {method}"
            if not wanted(name):
                continue
            module = serving_module(est, sinkhorn_method=method, sinkhorn_iter=(
                100 if isinstance(est, S.OTKEmbedding) else None))
            x, mask = pad_sets(X[:20])
            with torch.no_grad():
                report(name, *module(torch.from_numpy(x), torch.from_numpy(mask)))
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        print("onnx: not installed (ONNX settings skipped)", flush=True)
        return
    with tempfile.TemporaryDirectory() as tmp:
        for label, est, X in serving[:4]:  # k-mers: the legacy exporter has no dynamic unfold
            name = f"onnx {label}"
            if not wanted(name):
                continue
            path = Path(tmp) / "model.onnx"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                export_onnx(est, path, dynamo=False, sinkhorn_iter=(
                    100 if isinstance(est, S.OTKEmbedding) else None))
            out = run_onnx(path, X[:20])
            report(name, *(out[k] for k in sorted(out)))


if __name__ == "__main__":
    main()
