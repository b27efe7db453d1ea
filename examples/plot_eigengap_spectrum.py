"""
The eigengap: how many clusters?
================================

Spectral clustering needs the number of clusters ``k``. The eigengap heuristic reads it from the
spectrum of the normalised Laplacian :math:`L = I - D^{-1/2} A D^{-1/2}` of the affinity
:math:`A`: ``k`` well separated clusters give ``k`` eigenvalues near 0, then a jump. skset's
:func:`~skset.estimate_n_clusters` picks the largest gap, and
:class:`~skset.EigengapSpectralClustering` uses it when ``n_clusters=None``.

Here: blobs of 3, 4 and 6 clusters with an RBF affinity, the first eigenvalues of each Laplacian,
and the gap the rule picks.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_blobs
from sklearn.metrics.pairwise import rbf_kernel

from skset import EigengapSpectralClustering, estimate_n_clusters

fig, axes = plt.subplots(2, 3, figsize=(11, 7), constrained_layout=True)
for col, k in enumerate([3, 4, 6]):
    X, _ = make_blobs(n_samples=150, centers=k, cluster_std=0.5, center_box=(-8, 8),
                      random_state=k)
    A = rbf_kernel(X, gamma=0.5)
    k_hat = estimate_n_clusters(A)
    labels = EigengapSpectralClustering(gamma=0.5, random_state=0).fit(X).labels_

    d = A.sum(axis=1)
    L = np.eye(len(X)) - A / np.sqrt(np.outer(d, d))
    eig = np.linalg.eigvalsh(L)[:10]

    ax = axes[0, col]
    ax.scatter(X[:, 0], X[:, 1], c=labels, cmap="tab10", s=10, vmin=0, vmax=9)
    ax.set_title(f"{k} blobs, estimated k = {k_hat}")
    ax.set_xticks([])
    ax.set_yticks([])

    ax = axes[1, col]
    ax.plot(range(1, len(eig) + 1), eig, "o-")
    ax.axvspan(k_hat + 0.1, k_hat + 0.9, color="C1", alpha=0.3, label="largest gap")
    ax.set_xlabel("index i")
    ax.set_ylabel("eigenvalue of L")
    ax.set_xticks(range(1, len(eig) + 1))
    ax.legend(loc="lower right")
plt.show()
