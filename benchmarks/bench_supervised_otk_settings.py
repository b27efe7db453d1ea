"""Japanese Vowels: supervised OTKClassifier vs the unsupervised pipeline at one embedding size.

Both sides use skset's default NystromFeatures settings (bandwidth 0.5, keep_norm) with
``n_components`` anchors and ``n_supports`` supports; the unsupervised side is
NystromFeatures -> OTKEmbedding -> LogisticRegression(C=1), the supervised side OTKClassifier
with ``alpha = 1/n_train`` (the same L2 weight) and the extra keyword arguments given as a Python
dict literal. 5 seeds.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_supervised_otk_settings.py \
        "dict(max_iter=30, learning_rate_init=1e-3)" 128 10
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import ast  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402

from skset import NystromFeatures, OTKClassifier, OTKEmbedding  # noqa: E402
from skset.datasets import load_japanese_vowels  # noqa: E402

warnings.filterwarnings("ignore")


def main():
    call = ast.parse(sys.argv[1], mode="eval").body
    kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords}  # dict(a=1, ...) literal
    n_components, n_supports = int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(2)
    Xtr, ytr = load_japanese_vowels(subset="train", return_X_y=True)
    Xte, yte = load_japanese_vowels(subset="test", return_X_y=True)
    sup, uns, chosen = [], [], []
    for s in range(5):
        pipe = Pipeline([("n", NystromFeatures(n_components, random_state=s)),
                         ("o", OTKEmbedding(n_supports, random_state=s)),
                         ("c", LogisticRegression(max_iter=5000))])
        uns.append(pipe.fit(Xtr, ytr).score(Xte, yte))
        clf = OTKClassifier(n_components, n_supports=n_supports, alpha=1 / len(Xtr),
                            random_state=s, **kw)
        sup.append(clf.fit(Xtr, ytr).score(Xte, yte))
        chosen.append((int(clf.window_), clf.position_sigma_))
    u, a = 100 * np.array(uns), 100 * np.array(sup)
    print(f"{kw} anchors={n_components} supports={n_supports}: unsupervised "
          f"{u.mean():.2f} +- {u.std():.2f}, supervised {a.mean():.2f} +- {a.std():.2f}; "
          f"per seed {np.round(u, 2).tolist()} / {np.round(a, 2).tolist()}; the classifier's "
          f"(window_, position_sigma_) per seed {chosen}")


if __name__ == "__main__":
    main()
