"""
Attention-based clustering of overlapping circles
=================================================

Each instance holds 100 points on four circles with random centres and radii, every circle
crossing at least one other (the problem of Coward et al., Section 6.1). Spectral clustering with a
Gaussian (RBF) affinity groups points that are *close*, so it cuts the circles where they cross.
:class:`~skset.ABCClusterer` *learns* the affinity from labelled instances: an attention encoder
looks at the whole instance before it scores a pair of points, so two distant points of one circle
can be judged alike.

The model here is trained for a small CPU budget (a few hundred optimisation steps, well under a
minute); longer training (thousands of steps, as in ``benchmarks/bench_abc.py``) gives cleaner
clusters. The number of clusters of each test instance comes from the eigengap of the learned
affinity; the RBF baseline is given the true number, 4.
"""

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import adjusted_rand_score

from skset import ABCClusterer, EigengapSpectralClustering
from skset.datasets import make_circles_instances

X_train, y_train = make_circles_instances(512, 100, random_state=0)
X_test, y_test = make_circles_instances(20, 100, random_state=1)

t0 = time.perf_counter()
abc = ABCClusterer(dim=32, n_blocks=2, n_heads=4, max_iter=300, batch_size=16,
                   learning_rate_init=2e-3, device="cpu", random_state=0)
abc.fit(X_train, y_train)
print(f"trained {abc.n_iter_} steps in {time.perf_counter() - t0:.0f} s")

labels_abc = abc.predict(X_test)  # number of clusters by eigengap
labels_rbf = [EigengapSpectralClustering(n_clusters=4, gamma=10.0, random_state=0)
              .fit(X).labels_ for X in X_test]

ari_abc = [adjusted_rand_score(y, lab) for y, lab in zip(y_test, labels_abc)]
ari_rbf = [adjusted_rand_score(y, lab) for y, lab in zip(y_test, labels_rbf)]
print(f"mean adjusted Rand index over {len(X_test)} test instances: "
      f"ABC {np.mean(ari_abc):.2f}, RBF spectral clustering (true k) {np.mean(ari_rbf):.2f}")

# %%
# Three test instances
# --------------------
# Left: the true circles; middle: ABC (its number of clusters found by the eigengap); right:
# spectral clustering with an RBF affinity and the true number of clusters.
fig, axes = plt.subplots(3, 3, figsize=(9, 9), constrained_layout=True)
for row, i in enumerate(range(3)):
    X = X_test[i]
    panels = [("truth", y_test[i]),
              (f"ABC, k={len(np.unique(labels_abc[i]))}, ARI {ari_abc[i]:.2f}", labels_abc[i]),
              (f"RBF spectral, k=4, ARI {ari_rbf[i]:.2f}", labels_rbf[i])]
    for ax, (title, lab) in zip(axes[row], panels):
        ax.scatter(X[:, 0], X[:, 1], c=lab, cmap="tab10", s=12, vmin=0, vmax=9)
        ax.set_title(title, fontsize=10)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
plt.show()

# %%
# The learned affinity
# --------------------
# :meth:`~skset.ABCClusterer.affinity` returns each instance's ``n x n`` kernel, symmetric with
# values in ``[0, 1]``. Sorted by true circle, a good kernel is block diagonal.
A = abc.affinity(X_test[:1])[0]
order = np.argsort(y_test[0], kind="stable")
fig, ax = plt.subplots(figsize=(4.5, 4), constrained_layout=True)
im = ax.imshow(A[np.ix_(order, order)], cmap="viridis", vmin=0, vmax=1)
fig.colorbar(im, ax=ax)
ax.set_title("learned affinity, points sorted by circle")
plt.show()
