"""skset: scikit-learn compatible machine learning on sets, with torch inside.

A *set* is a variable-size collection of feature vectors, given as an ``(n_i, d)`` array; a
collection of sets is a list of such arrays (or a 3-D array when all sets have one size).
"""

from ._config import config_context, get_config, set_config
from ._frames import frame_from_sets, sets_from_frame
from ._persist import load, save
from ._version import __version__
from .cluster import ABCClusterer, EigengapSpectralClustering, estimate_n_clusters
from .dilated_kernels import DilatedKernelFeatures
from .embedding import OTKEmbedding
from .export import export_onnx
from .kernel_approximation import NystromFeatures
from .neural_network import (
    DeepSetsClassifier,
    DeepSetsRegressor,
    OTKClassifier,
    OTKRegressor,
    SetTransformerClassifier,
    SetTransformerRegressor,
)
from .ot._compiled import CompileWarning

__all__ = [
    "ABCClusterer",
    "CompileWarning",
    "DeepSetsClassifier",
    "DeepSetsRegressor",
    "DilatedKernelFeatures",
    "EigengapSpectralClustering",
    "NystromFeatures",
    "OTKClassifier",
    "OTKEmbedding",
    "OTKRegressor",
    "SetTransformerClassifier",
    "SetTransformerRegressor",
    "__version__",
    "config_context",
    "estimate_n_clusters",
    "export_onnx",
    "frame_from_sets",
    "get_config",
    "load",
    "save",
    "set_config",
    "sets_from_frame",
]
