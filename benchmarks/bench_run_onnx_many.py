"""``skset.export.run_onnx`` on many small sets: 50,000 sets of 2-8 elements of 8 features,
through the ONNX exports of a ``DeepSetsClassifier`` (one row per set) and of a
``NystromFeatures`` of 2-mers (one row per k-mer), fitted on 2,000 of them; median of three
calls each, one thread; prints the seconds and a checksum of the outputs. Timed against another
checkout of skset::

    for r in <other checkout> . <other checkout> .; do
        PYTHONPATH=$r OMP_NUM_THREADS=1 python benchmarks/bench_run_onnx_many.py
    done

Results: ``results/otk_transform.md``, "run_onnx on many small sets".
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import hashlib  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402

import skset  # noqa: E402
from skset.export import export_onnx, run_onnx  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(n), 8)).astype(np.float32) for n in rng.integers(2, 9, 50_000)]
    y = np.arange(len(X)) % 2
    models = {
        "DeepSetsClassifier": skset.DeepSetsClassifier(max_iter=2, random_state=0).fit(X[:2000], y[:2000]),
        "NystromFeatures 2-mers": skset.NystromFeatures(n_components=32, window=2, kmer_coding="plain",
                                                        random_state=0).fit(X[:2000]),
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, est in models.items():
            path = os.path.join(tmp, "model.onnx")
            export_onnx(est, path)
            session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            times = []
            for _ in range(3):
                start = time.perf_counter()
                out = run_onnx(session, X)
                times.append(time.perf_counter() - start)
            first = next(iter(out.values()))
            flat = np.concatenate(first) if isinstance(first, list) else first
            digest = hashlib.sha256(np.ascontiguousarray(flat).tobytes()).hexdigest()[:12]
            print(f"{name}: {np.median(times):.3f} s (median of 3); output {digest}", flush=True)


if __name__ == "__main__":
    main()
