"""
Choosing the element map
========================

:class:`skset.NystromFeatures` decides in ``fit`` how to prepare the elements before its Gaussian
kernel: per-feature standardisation, projection on the unit sphere, keeping the norm after it,
and the bandwidth. Each of these parameters defaults to ``"auto"``: given the labels (a
``Pipeline`` passes them to every step), it scores every candidate by a leave-one-out ridge fit
on mean-pooled features of a sample of the training sets, and keeps the fixed choice unless a
candidate is better by more than noise.

This example shows the choice on two bag problems where the right answer is known (the class is
only in the elements' norms, or only in their directions), then the grid search a user runs over
the OTK embedding and the element map together.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: no spinning threads

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402
from skset.datasets import load_japanese_vowels  # noqa: E402

rng = np.random.default_rng(0)


def bags(kind, n_sets=120, d=6):
    """Bags of 8-15 elements; the class is in the norms or in the directions only."""
    y = np.arange(n_sets) % 2
    sets = []
    for label in y:
        n = rng.integers(8, 16)
        u = rng.normal(size=(n, d))
        if kind == "directions":
            u[:, 0] += 0.5 if label else -0.5
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        if kind == "norms":
            r = rng.uniform(0.5, 1.5, size=(n, 1)) * (2.0 if label else 1.0)
        else:  # heavy-tailed norms that say nothing about the class
            r = np.exp(rng.normal(0.0, 2.0, size=(n, 1)))
        sets.append(u * r)
    return sets, y


# %%
# What ``"auto"`` picks
# ---------------------
# ``verbose=1`` prints the choice; ``selection_scores_`` holds every candidate's score (minus the
# leave-one-out squared error of the pooled features: higher is better).

fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=False)
for ax, kind in zip(axes, ("norms", "directions")):
    sets, y = bags(kind)
    nf = NystromFeatures(n_components=32, random_state=0, verbose=1).fit(sets, y)
    labels = [f"{'std' if c['standardize'] else 'raw'}"
              f"{'' if not c['normalize'] else (' sphere+norm' if c['keep_norm'] else ' sphere')}"
              f" bw {c['bandwidth']}" for c, _ in nf.selection_scores_]
    scores = [s for _, s in nf.selection_scores_]
    ax.barh(range(len(scores)), scores, color=["C1" if lab.startswith(
        f"{'std' if nf.standardize_ else 'raw'}") and (" sphere" in lab) == nf.normalize_
        and lab.endswith(f"bw {nf.relative_bandwidth_}") and (("+norm" in lab) == (
            nf.normalize_ and nf.keep_norm_)) else "C0" for lab in labels])
    ax.set_yticks(range(len(scores)), labels, fontsize=7)
    ax.set_title(f"class in the {kind}")
    ax.set_xlabel("score (higher is better)")
fig.tight_layout()

# %%
# When the class is in the norms, projecting on the sphere without keeping the norm would erase
# it, and the rule does not take that map; when it is only in the directions (and the norms are
# heavy-tailed noise), the projection without the norm wins clearly and is taken.
#
# The mission's grid
# ------------------
# The element map's parameters stay ordinary parameters: ``GridSearchCV`` can set them next to
# the embedding's ``epsilon`` and ``n_supports`` (``"auto"`` is one more value of the grid).

X_train, y_train = load_japanese_vowels(subset="train", return_X_y=True)
X_test, y_test = load_japanese_vowels(subset="test", return_X_y=True)
pipe = Pipeline([("nystrom", NystromFeatures(random_state=0)),
                 ("otk", OTKEmbedding(random_state=0)),
                 ("clf", LogisticRegression(max_iter=2000))])
grid = {"otk__epsilon": [0.1, 0.5], "otk__n_supports": [5, 10],
        "nystrom__normalize": ["auto", False]}
search = GridSearchCV(pipe, grid, cv=3).fit(X_train, y_train)
print("best:", search.best_params_, f"cv accuracy {search.best_score_:.4f}")
print(f"test accuracy {search.score(X_test, y_test):.4f}")
chosen = search.best_estimator_.named_steps["nystrom"]
print("element map of the refit:", {k: getattr(chosen, k + "_") for k in
                                    ("standardize", "normalize", "keep_norm")},
      "bandwidth", chosen.relative_bandwidth_)
