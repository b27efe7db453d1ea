"""The docstring sections of the Set Transformer estimators (parameters, references), shared by
:class:`~skset.SetTransformerClassifier` and :class:`~skset.SetTransformerRegressor`, and the
input parameters both set networks share."""

from ._network_kmers import KMER_DOC
from ._pooled_skip import POOLED_SKIP_DOC

__all__ = ["NETWORK_INPUT_DOC", "ST_DOC", "ST_REFS"]

# the input parameters of both set networks (Deep Sets' docstring takes them too)
NETWORK_INPUT_DOC = """    standardize : "auto" or bool, default="auto"
        ``True``: standardise each element feature by its mean and standard deviation over all
        training elements (``mean_``, ``scale_``), as ``NystromFeatures`` does. ``"auto"``: the
        same, and where the training sets' own deviations lie far apart (their 90th percentile
        over 100 times their 10th: a series of noise beside one of hundreds of units), each set's
        elements are read less the set's mean over its deviation (what the k-mers read), the
        set's mean and the log of its deviation appended to each of them, at fit and predict
        alike (``set_standardized_``, ``set_scale_floor_``). ``False`` feeds the raw
        features, which did better on MNIST bags of raw pixel intensities (200 training bags)
        and worse on unique counting of digits (see :ref:`network-input-scaling`).
""" + POOLED_SKIP_DOC + KMER_DOC

ST_DOC = """
    Parameters
    ----------
    hidden_size : int, default=64
        Model width ``D`` of every block.
    n_layers : int, default=2
        Encoder blocks (SAB or ISAB).
    n_heads : int, default=4
        Attention heads; ``hidden_size`` must be divisible by it. Scores are scaled by
        ``1/sqrt(hidden_size / n_heads)``.
    n_inducing : int or None, default=16
        ``None``: SAB blocks (quadratic in the set size); an int ``m``: ISAB blocks with ``m``
        learned inducing points (linear in the set size).
    n_seeds : int, default=1
        PMA seed vectors; :meth:`transform` returns ``n_seeds * hidden_size`` features.
    norm : {"layer", "set", None}, default="layer"
        Layer norm (the Set Transformer), set norm (ST++) or none.
    residual : {"original", "clean"}, default="original"
        Post-norm MAB of the Set Transformer or the clean-path block of ST++ (eq. 21-26).
        ``norm="set", residual="clean"`` is Set Transformer++.
    point_init : {"xavier", "normal"}, default="xavier"
        Initialisation of the learned inducing points and PMA seeds: the reference code's
        Xavier-uniform (entries ~0.15 at width 64) or standard normal entries (the scale of a
        normalised element).
    decoder : {"mlp", "sab"}, default="mlp"
        ``"mlp"``: one hidden Linear-ReLU layer on the ``n_seeds`` pooled vectors; ``"sab"``: the
        paper's ``rFF(SAB(PMA_k(Z)))``, a SAB over the pooled seeds then a Linear layer.
    dropout : float, default=0.0
        Dropout rate on the feed-forward output of every attention block and of the pooling's
        ``rFF``, in training only (predictions never drop). Its masks are drawn from torch's
        generator seeded from ``random_state``, so a fit repeats, and the caller's global
        generator is left as it was. A training parameter: a warm start may change it. Not
        the default: on the real-data suite 0.1 lifted small sets of series and lowered
        MNISTBags200 (see :ref:`st-dropout`).
""" + NETWORK_INPUT_DOC

ST_REFS = """
    See Also
    --------
    DeepSetsClassifier, DeepSetsRegressor : sum/mean/max pooling networks.
    skset.nn.SetTransformer : the underlying torch module.

    References
    ----------
    .. [1] J. Lee, Y. Lee, J. Kim, A. Kosiorek, S. Choi, Y. W. Teh. Set Transformer: A Framework for
       Attention-based Permutation-Invariant Neural Networks. ICML 2019.
    .. [2] L. H. Zhang, V. Tozzo, J. M. Higgins, R. Ranganath. Set Norm and Equivariant Skip
       Connections: Putting the Deep in Deep Sets. ICML 2022.
"""
