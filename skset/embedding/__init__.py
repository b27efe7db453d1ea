"""Set-to-vector embeddings: :class:`OTKEmbedding`.

``_estimator.py`` holds the estimator (parameters, engine calls, ``fit``, ``transform``,
conversion to a layer); ``_references.py`` how it fits its references (k-means reference,
Wasserstein barycenter, Wasserstein k-means of several references, the counts and the step of
``partial_fit``).
"""

from ._estimator import OTKEmbedding

__all__ = ["OTKEmbedding"]
