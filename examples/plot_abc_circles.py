"""
Attention-based clustering of overlapping circles
=================================================

Each instance holds 100 points on four circles with random centres and radii, every circle
crossing at least one other (the problem of Coward et al., 2020, Section 6.1). Spectral clustering
with a Gaussian (RBF) affinity groups points that are *close*, so it cuts the circles where they
cross, and k-means looks for round blobs. :class:`~skset.ABCClusterer` *learns* the affinity from
labelled instances: an attention encoder looks at the whole instance before it scores a pair of
points, so two distant points of one circle can be judged alike.

**The model is pre-trained.** Training it to a good result takes about 45 minutes on a 2-core CPU,
far over this gallery's budget of a minute per example, so the example loads a model we trained
with the project's benchmark script and stored with :func:`skset.save` (no pickle; 0.8 MB, in
``examples/data/abc_circles_20k.skset``). It is
``ABCClusterer("multiplicative", hidden_size=128, n_layers=2, n_heads=4)`` trained with Adam on
20,000 steps of 32 fresh circles instances each (640,000 instances): 8,750 steps at learning rate
1e-3 (the last ones stopped by the plateau rule), then 3,250 at 3e-4 and 8,000 at 1e-4. The
commands (``benchmarks/bench_abc.py``; each run resumes the previous one on new instances, and
keeps its checkpoint as a pickle, with the optimizer state that resuming needs; the last command
stores the final model with :func:`skset.save`, without that state)::

    python benchmarks/bench_abc.py circles --steps 4000 --save circles4000.pkl
    python benchmarks/bench_abc.py circles --model circles4000.pkl --resume --steps 4000 \\
        --train-seed 1 --save circles8000.pkl
    python benchmarks/bench_abc.py circles --model circles8000.pkl --resume --steps 4000 \\
        --train-seed 2 --save circles8750.pkl   # stopped at 8,750 steps by the plateau rule
    python benchmarks/bench_abc.py circles --model circles8750.pkl --resume --steps 3250 \\
        --train-seed 3 --lr 3e-4 --patience 1000 --save circles12k.pkl
    python benchmarks/bench_abc.py circles --model circles12k.pkl --resume --steps 4000 \\
        --train-seed 4 --lr 1e-4 --patience 1000 --save circles16k.pkl
    python benchmarks/bench_abc.py circles --model circles16k.pkl --resume --steps 4000 \\
        --train-seed 5 --lr 1e-4 --patience 1000 --save circles20k.pkl
    python -c "import pickle, skset; abc = pickle.load(open('circles20k.pkl', 'rb')); \\
        abc._optimizer_state = None; skset.save(abc, 'examples/data/abc_circles_20k.skset')"

On the benchmark's 100 test instances it reaches a mean adjusted Rand index (ARI) of 0.80 with the
true number of clusters and 0.78 with the number found by the eigengap, against 0.19 for RBF
spectral clustering and 0.23 for k-means (both given the true number). To train a small model
yourself instead, set ``RETRAIN = True`` below: 300 steps of a smaller network (about 30 s) give
a model no better than the baselines (mean ARI 0.19 with k=4, 0.18 with the eigengap's k, which
finds k=4 in 40% of the instances; RBF spectral clustering 0.20, k-means 0.23 on those 20).
"""

# %%
# Load the trained model (or train a small one)
# ---------------------------------------------
# sphinx-gallery runs the examples from the ``examples`` directory without ``__file__``, so the
# path falls back to the working directory.
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import KMeans, SpectralClustering
from sklearn.metrics import adjusted_rand_score
from sklearn.metrics.pairwise import rbf_kernel

import skset
from skset.datasets import make_circles_instances

RETRAIN = False  # True: train a small model here (about 30 s) instead of loading the stored one

try:
    HERE = Path(__file__).resolve().parent
except NameError:
    HERE = Path.cwd()

if RETRAIN:
    X_train, y_train = make_circles_instances(300 * 16, 100, random_state=0)
    abc = skset.ABCClusterer(hidden_size=32, n_layers=2, n_heads=4, max_steps=300, batch_size=16,
                             learning_rate_init=2e-3, device="cpu", random_state=0)
    abc.fit(X_train, y_train)
else:
    abc = skset.load(HERE / "data" / "abc_circles_20k.skset")
print(f"ABCClusterer(hidden_size={abc.hidden_size}, n_layers={abc.n_layers}, n_heads={abc.n_heads}), "
      f"trained {abc.n_iter_} steps, final training BCE {abc.loss_curve_[-1]:.3f}")

# %%
# Cluster fresh instances four ways
# ---------------------------------
# 20 new instances (a seed the training never used). ABC clusters them all in one batched call,
# once with the number of clusters from the eigengap of each learned affinity and once with the
# true number, 4. The baselines get the true number: scikit-learn's spectral clustering with an RBF
# affinity (``gamma=1``, the best of {0.3, 1, 3, 10, 30, 100} on other instances) and k-means.
X_test, y_test = make_circles_instances(20, 100, random_state=2026)

labels = {
    "ABC, eigengap k": abc.predict(X_test),
    "ABC, k=4": abc.predict(X_test, n_clusters=4),
    "RBF spectral, k=4": [SpectralClustering(4, affinity="rbf", gamma=1.0, random_state=0)
                          .fit_predict(X) for X in X_test],
    "k-means, k=4": [KMeans(4, n_init=10, random_state=0).fit_predict(X) for X in X_test],
}
ari = {name: np.array([adjusted_rand_score(y, lab) for y, lab in zip(y_test, labs)])
       for name, labs in labels.items()}
k_found = np.array([len(np.unique(lab)) for lab in labels["ABC, eigengap k"]])
print(f"mean adjusted Rand index over {len(X_test)} instances of 100 points:")
for name, scores in ari.items():
    print(f"  {name:18s} {scores.mean():.3f}")
print(f"eigengap found k=4 in {np.mean(k_found == 4):.0%} of the instances")

# %%
# Three instances
# ---------------
# Columns: the true circles, ABC with the eigengap's k, ABC with k=4, RBF spectral clustering and
# k-means (both with k=4). The baselines cut the circles where they cross; ABC follows them.
# Each clustering's labels are matched to the true circles (Hungarian matching) so that the colours
# agree where the clusters do.


def match_labels(y_true, y_pred):
    """Relabel ``y_pred`` so that its clusters take the colours of the circles they overlap most."""
    C = np.zeros((y_pred.max() + 1, max(y_true.max(), y_pred.max()) + 1))
    np.add.at(C, (y_pred, y_true), 1)
    rows, cols = linear_sum_assignment(-C)  # every predicted cluster gets its own colour
    new = np.empty(len(C), dtype=int)
    new[rows] = cols
    return new[y_pred]


fig, axes = plt.subplots(3, 5, figsize=(14, 8.6), constrained_layout=True)
for row, i in enumerate(range(3)):
    X = X_test[i]
    panels = [("truth", y_test[i])] + [
        (f"{name}\nk={len(np.unique(labs[i]))}, ARI {ari[name][i]:.2f}", labs[i])
        for name, labs in labels.items()]
    panels = [(title, match_labels(y_test[i], lab)) for title, lab in panels]
    for ax, (title, lab) in zip(axes[row], panels):
        ax.scatter(X[:, 0], X[:, 1], c=lab, cmap="tab10", s=10, vmin=0, vmax=9)
        ax.set_title(title, fontsize=10)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
plt.show()

# %%
# The learned affinity
# --------------------
# :meth:`~skset.ABCClusterer.affinity` returns each instance's ``n x n`` kernel, symmetric with
# values in ``[0, 1]``. With the points sorted by true circle, an ideal kernel is block diagonal
# with zeros between blocks; then the normalised Laplacian has one zero eigenvalue per circle and
# a jump after them, which is how the eigengap finds k. The learned kernel is close to that: its
# first four eigenvalues stay low and the fifth jumps. The RBF kernel (middle) links nearby points
# of different circles, and its spectrum rises without a gap at 4.
i = 0
order = np.argsort(y_test[i], kind="stable")
A_abc = abc.affinity(X_test[i:i + 1])[0]
A_rbf = rbf_kernel(X_test[i], gamma=1.0)


def laplacian_spectrum(A, m=10):
    d = A.sum(axis=1)
    return np.linalg.eigvalsh(np.eye(len(A)) - A / np.sqrt(np.outer(d, d)))[:m]


fig, axes = plt.subplots(1, 3, figsize=(14, 4.3), constrained_layout=True)
for ax, A, title in [(axes[0], A_abc, "ABC affinity"), (axes[1], A_rbf, "RBF affinity, gamma=1")]:
    im = ax.imshow(A[np.ix_(order, order)], cmap="viridis", vmin=0, vmax=1)
    ax.set_title(f"{title}, points sorted by circle", fontsize=10)
    ax.set_xticks([])
    ax.set_yticks([])
fig.colorbar(im, ax=axes[:2], shrink=0.9)
for A, name in [(A_abc, "ABC"), (A_rbf, "RBF")]:
    axes[2].plot(range(1, 11), laplacian_spectrum(A), "o-", label=name)
axes[2].axvline(4.5, color="gray", ls=":", label="true k = 4")
axes[2].set_xlabel("index i")
axes[2].set_ylabel("eigenvalue of the normalised Laplacian")
axes[2].set_xticks(range(1, 11))
axes[2].legend()
plt.show()
