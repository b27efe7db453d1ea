"""Pure-torch building blocks: batched tensors ``(B, n_max, d)`` with a boolean mask ``(B, n_max)``.

No numpy, no scikit-learn: these modules can be used inside any network.
"""

from .abc import ABCKernel, abc_affinity, abc_loss, same_cluster_matrix
from .attention import (
    ISAB,
    MAB,
    PMA,
    SAB,
    AttentionRecord,
    MultiheadAttention,
    SetTransformer,
    record_attention,
)
from .deep_sets import DeepSets, DeepSetsBlock, DeepSetsEncoder, PooledLinear, masked_pool
from .dilated_kernels import DilatedKernelPPV, kernel_responses
from .norm import SetNorm, set_norm
from .nystrom import (
    NystromLayer,
    gaussian_kernel,
    inv_sqrt_psd,
    kmer_level_shape,
    kmer_unfold,
    nystrom_map,
)
from .otk import OTKLayer, otk_embed, otk_plans, otk_pool
from .spectral import (
    batched_kmeans,
    eigengap_n_clusters,
    laplacian_eigh,
    normalized_laplacian,
    spectral_cluster,
    spectral_embedding,
)

__all__ = [
    "ABCKernel",
    "abc_affinity",
    "abc_loss",
    "same_cluster_matrix",
    "AttentionRecord",
    "ISAB",
    "MAB",
    "MultiheadAttention",
    "PMA",
    "SAB",
    "SetNorm",
    "SetTransformer",
    "DeepSets",
    "DilatedKernelPPV",
    "kernel_responses",
    "DeepSetsBlock",
    "DeepSetsEncoder",
    "masked_pool",
    "PooledLinear",
    "set_norm",
    "NystromLayer",
    "OTKLayer",
    "batched_kmeans",
    "eigengap_n_clusters",
    "gaussian_kernel",
    "inv_sqrt_psd",
    "kmer_unfold",
    "kmer_level_shape",
    "laplacian_eigh",
    "normalized_laplacian",
    "nystrom_map",
    "otk_embed",
    "otk_plans",
    "otk_pool",
    "record_attention",
    "spectral_cluster",
    "spectral_embedding",
]
