"""How far OTKEmbedding.transform's torch output step is from the numpy one it replaced.

OTKEmbedding.transform centres, floors and normalises its raw embeddings with
``skset.nn.otk.embedding_output`` (torch), the step its serving module and the supervised OTK
network use. Before, transform ran a numpy copy of that step; numpy and torch sum the squares of
a row's norm in different orders, so the outputs differ by rounding. This script fits
OTKEmbedding on 120 training sets of Japanese Vowels (fixed seeds, one thread), applies the former
numpy step (kept below as the reference) to the same raw embeddings of 60 test sets, and prints,
per setting, the largest absolute difference (also in units of the dtype's eps) and the share of
entries whose bits differ:

    PYTHONPATH=. python benchmarks/output_step_rounding.py > benchmarks/results/output_step.md
"""

import math
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import skset  # noqa: E402
from skset.datasets import load_japanese_vowels  # noqa: E402

torch.set_num_threads(1)


def numpy_step(est, raw):
    """The former numpy output step of OTKEmbedding.transform (float64 noise floor)."""
    emb = raw.copy()
    q, p, d = est.references_.shape
    eps, blocks = np.finfo(emb.dtype).eps, emb.reshape(-1, q, p, d).astype(np.float64)
    spread = np.linalg.norm((blocks - blocks.mean(2, keepdims=True)).reshape(len(emb), -1), axis=1)
    size = np.linalg.norm(emb.astype(np.float64), axis=1) + np.linalg.norm(est.mean_)
    floor = 1000.0 * eps * size + 10.0 * float(est.sinkhorn_tol or 0.0) * spread
    emb -= est.mean_
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    emb *= np.where(norms > floor[:, None], math.sqrt(emb.shape[1]) / np.maximum(norms, 1e-12),
                    0.0)
    return emb


def main():
    Xtr, _ = load_japanese_vowels(subset="train", return_X_y=True)
    Xte, _ = load_japanese_vowels(subset="test", return_X_y=True)
    Xtr, Xte = list(Xtr[:120]), list(Xte[:60])
    print("| setting | dtype | max abs difference | in eps | entries differing | max abs output |")
    print("|---|---|---|---|---|---|")
    for kw in [{}, {"fit_method": "wasserstein", "n_references": 2},
               {"position_sigma": 0.1, "dtype": "float64"}, {"sinkhorn_method": "log"},
               {"n_supports": 64, "n_references": 3}]:
        est = skset.OTKEmbedding(random_state=0, **kw).fit(Xtr)
        new = est.transform(Xte)
        raw = est._raw_embed(est._check_X(Xte), torch.as_tensor(est.references_))
        old = numpy_step(est, raw)
        diff = np.abs(new - old).max()
        eps = np.finfo(new.dtype).eps
        print(f"| `{kw or 'defaults'}` | {new.dtype} | {diff:.3g} | {diff / eps:.1f} | "
              f"{np.mean(new != old):.3f} | {np.abs(new).max():.3g} |")


if __name__ == "__main__":
    main()
