"""Clustering: spectral clustering with the eigengap, and Attention-Based Clustering (ABC).

* :func:`estimate_n_clusters`: eigengap of the symmetric normalised Laplacian, for one affinity
  matrix or (batched in torch) for many.
* :class:`EigengapSpectralClustering`: scikit-learn style spectral clustering of one data set, with
  ``n_clusters=None`` meaning "estimate it".
* :class:`ABCClusterer`: Attention-Based Clustering, a kernel learned from labelled instances
  and applied to many new instances at once.
"""

from ._abc import ABCClusterer
from ._eigengap import EigengapSpectralClustering, estimate_n_clusters

__all__ = ["estimate_n_clusters", "EigengapSpectralClustering", "ABCClusterer"]
