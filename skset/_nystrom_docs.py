"""The docstring of :class:`~skset.NystromFeatures` (parameters, attributes, examples), kept
beside the estimator's code so that each stays readable."""

NYSTROM_FEATURES_DOC = (
    r"""Nystrom approximation of a Gaussian kernel, applied to every element (or k-mer) of sets.

    Each element :math:`x` (after per-feature standardisation, optional k-mer concatenation and
    optional projection on the unit sphere) is mapped to

    .. math:: \psi(x) = \kappa(w, w)^{-1/2} \kappa(w, x) \in \mathbb{R}^k, \qquad
              \kappa(x, x') = \exp\big(-\|x - x'\|^2 / (2\sigma^2)\big),

    with anchors :math:`w_1..w_k` found by k-means on a sample of training elements, so that
    :math:`\langle\psi(x), \psi(x')\rangle \approx \kappa(x, x')`. On unit vectors the kernel is the
    CKN form :math:`\exp((\langle x, x'\rangle - 1)/\sigma^2)` used by Mialon et al. (2021).

    A collection of sets gives back the same form (list in, list out; 3-D in, 3-D out); a plain 2-D
    array is read as one pool of elements and gives back a 2-D array, like
    :class:`sklearn.kernel_approximation.Nystroem`.

    Parameters
    ----------
    n_components : int, default=128
        Number of anchors ``k`` (output features per element).
    bandwidth : float or "auto", default="auto"
        Kernel bandwidth ``sigma``, relative to the data: the kernel uses ``bandwidth * scale``
        with ``scale`` the median distance between sampled training elements (k-mers, after the
        preprocessing below) divided by sqrt(2) (``bandwidth_`` holds the absolute value). An
        explicit value with ``normalize=True`` is absolute, in units of the unit sphere (0.5-0.6
        in the paper). ``"auto"``: chosen in ``fit`` among 0.25, 0.5, 1 and 2 (see below;
        0.5 without labels).
    window : int or "auto", default="auto"
        k-mer width: ``window`` consecutive elements of each (ordered) set are concatenated into one
        element before the map, so a set of ``n`` elements gives ``n - window + 1`` (``fit``
        refuses training sets shorter than an explicit ``window``; a fitted map reads a shorter
        set as one k-mer, its last element repeated). ``"auto"``:
        ``window_`` chosen in ``fit`` among 1 and the widths 3, 5, 10, 20 that the training sets
        hold twice (all but one in a hundred, rounded down), k-mers only where they predict the labels
        better by more than noise (1 without labels, for a 2-D pool); see the :ref:`nystrom`
        guide.
    dilation : int or "auto", default="auto"
        With ``window > 1``: the k-mer's elements are ``dilation`` steps apart, ``x_i, x_{i +
        dilation}, ..., x_{i + (window - 1) dilation}``, so that a k-mer spans ``(window - 1) *
        dilation + 1`` steps with ``window`` elements; a set shorter than that span has one
        k-mer, its last element repeated (with contiguous k-mers, ``dilation=1``, only once
        fitted: ``fit`` refuses training sets shorter than an explicit ``window``). ``"auto"``:
        with ``window="auto"``, once k-mers are taken, ``window_`` and ``dilation_`` may become
        one of the pairs 10:2, 10:4, 10:8, 10:16, 5:8, 5:16, 5:32, 3:16 (width:dilation) whose
        span is at most 2/3 of the median training length, where it predicts the labels better
        than the width by a clear margin (a paired t above 3); 1 otherwise, and with an explicit
        ``window`` (an explicit dilation with ``window="auto"``: widths scored with it).
    kmer_coding : {"level_shape", "plain"}, default="level_shape"
        With ``window > 1``, how a k-mer is written before the standardisation and the map.
        ``"level_shape"``: its deviations from its own mean over the window (its shape,
        ``window * n_features`` values) followed by that mean (its level, ``n_features``
        values), :func:`skset.nn.kmer_level_shape`. ``"plain"``: the ``window`` elements one
        after the other. The steps of a k-mer of a smooth series are strongly correlated, so the
        distance between plain k-mers is dominated by the difference of their levels, counted
        ``window`` times; coded, the level is one coordinate per channel and shapes at different
        heights are compared as shapes. Both codings are linear and lose nothing. Ignored with
        ``window=1``. The :ref:`nystrom` guide gives the suite figures behind the default.
    standardize : bool or "auto", default="auto"
        Standardise each input feature by its mean and standard deviation over training elements
        (before plain k-mers are built; of the coded k-mers with ``kmer_coding="level_shape"``).
        For a univariate series with plain k-mers this is one affine map of all values.
        ``"auto"``: chosen in ``fit`` (``True`` without labels).
    normalize : bool or "auto", default="auto"
        Project each element / k-mer on the unit sphere before the kernel (as in CKN and the
        paper's protein models): what counts is then the element's direction. ``"auto"``: chosen
        in ``fit`` (``False`` without labels: the projection maps scalar elements to +-1 and
        blows k-mers near the mean, mostly noise, up to unit norm).
    keep_norm : bool or "auto", default="auto"
        With ``normalize``, multiply each output back by the element's norm (CKN's homogeneous
        kernel ``||x|| ||x'|| kappa(x/||x||, x'/||x'||)``), so that the size of an element still
        counts; ``False`` keeps only its direction. Ignored without ``normalize``. ``"auto"``:
        chosen in ``fit``.

        **How "auto" chooses.** Given labels ``y`` (a ``Pipeline`` passes them to every step),
        each combination of the automatic parameters is scored on a sample of the training sets
        (at most 600, at most 64 elements of each): anchors drawn among the sampled elements
        (the same for every candidate), the map, the mean of each set, and the leave-one-out
        squared error of a ridge model on those pooled means (one SVD per candidate). The
        preprocessing is chosen first at bandwidth 0.5, then the bandwidth; a candidate replaces
        the fixed choice only when its per-set errors are lower by more than noise (paired t
        statistic above 2). Without usable labels (``y=None``, a single class, fewer than 10
        sets, multi-output ``y``; classes of one set are left out) the fixed choice
        ``standardize=True, normalize=False, bandwidth=0.5`` is taken. The choice and the
        scores are fitted attributes; the :ref:`nystrom` guide ("choosing the element map")
        gives the rule and the suite it was tested on.
    anchors : {"kmeans", "random"}, default="kmeans"
        Anchors are k-means centroids of (a sample of) training elements, or random elements.
    max_samples : int or "auto", default="auto"
        Training elements (or k-mers) sampled for the anchors (all when fewer). ``"auto"``:
        100,000, fewer for wide elements so that the sample holds at most 2^25 values
        (``skset._weighting.MAX_SAMPLE_VALUES``; 25,420 coded 10-mers of 120 features), since
        k-means costs rows x features x anchors per iteration (no data set of the suite has
        enough values to be cut).
    eigenvalue_floor : float, default=1e-4
        Eigenvalues of ``kappa(w, w)`` below ``eigenvalue_floor * max_eigenvalue`` are raised to
        it before the inverse square root.
    max_elements : int, default=262144
        Elements mapped at once (memory bound for ``transform``).
    target_type : {"auto", "continuous", "binary", "multiclass"}, default="auto"
        How the ``y`` of ``fit`` is read by the ``"auto"`` rules (scikit-learn's
        ``TargetEncoder`` names): ``"continuous"``, real targets whatever their values (pass it
        before a regressor whose targets are whole numbers); ``"binary"`` or ``"multiclass"``,
        classes whatever their values; ``"auto"``, ``sklearn.utils.multiclass.type_of_target``,
        except that whole numbers of which most sets hold a value of their own are read as real
        targets.
    verbose : int, default=0
        ``>= 1`` prints the element map chosen in ``fit``.
    device : str, default="auto"
        Torch device; ``"auto"`` uses CUDA when available.
    dtype : {"float32", "float64"}, default="float32"
        Compute and output dtype.
    random_state : int, RandomState or None, default=None
        Seed for the element sample and k-means.

    Attributes
    ----------
    anchors_ : ndarray of shape (k, window * n_features) or (k, (window + 1) * n_features)
        The anchors ``w`` (unit norm when ``normalize_``); ``k = n_components_``; the second
        shape for coded k-mers (``kmer_coding="level_shape"``, ``window > 1``).
    normalization_ : ndarray of shape (k, k)
        ``kappa(w, w)^{-1/2}``.
    mean_, scale_ : ndarray of shape (n_features,) or ((window + 1) * n_features,)
        Standardisation of the elements (of the coded k-mers with ``kmer_coding="level_shape"``);
        without it ones and zeros, but in float32 the mean of a feature over 10 spreads from 0.
    bandwidth_ : float
        The bandwidth the kernel uses (absolute).
    relative_bandwidth_ : float
        ``bandwidth_`` over the data's scale (the chosen or given ``bandwidth``); with
        ``normalize`` and a given bandwidth, the given value (absolute on the unit sphere).
    standardize_, normalize_, keep_norm_ : bool
        The preprocessing used: the given values, or those chosen for ``"auto"``.
    window_ : int
        The k-mer width used: ``window``, or the one chosen for ``"auto"``.
    dilation_ : int
        The k-mer dilation used: ``dilation``, or the one chosen for ``"auto"``.
    window_scores_ : list of (int or (int, int) or "shuffled", float) or None
        The widths (and ``(width, dilation)`` pairs) scored by ``window="auto"`` (minus the
        leave-one-out squared error of pooled features; higher is better), then, where a pair
        beat single elements with no width taken, ``"shuffled"``: the order test's k-mers of
        shuffled copies of the sets; ``None`` when nothing was chosen from labels.
    selection_scores_ : list of (dict, float) or None
        The candidates scored by ``"auto"`` (parameters, minus the leave-one-out squared error of
        pooled features; higher is better), ``None`` when nothing was chosen from labels.
    n_components_ : int
        Anchors used (fewer than ``n_components`` when there are fewer distinct elements).
    counts_ : ndarray of shape (k,)
        Weight of the training elements (sampled, as the anchors see them) nearest to each
        anchor: of ``fit``'s data, plus those of every later ``partial_fit`` chunk (the counts
        of the mini-batch k-means steps; ``anchors="random"`` keeps ``fit``'s).
    n_steps_ : int
        Chunks the anchors were fitted on: 1 after ``fit`` or the first ``partial_fit``, plus
        one per later ``partial_fit`` call.
    n_features_in_ : int
        Features per element seen in ``fit``.
    device_ : torch.device
        Resolved device.
    dtype_ : torch.dtype
        Resolved compute dtype (``dtype``).

    See Also
    --------
    sklearn.kernel_approximation.Nystroem : the same map for one pool of samples.
    OTKEmbedding : pools the element features of each set into one vector.
    skset.nn.NystromLayer : the same map as a trainable torch module, with the same defaults
        (``n_components``, ``bandwidth``, ``normalize``, ``keep_norm``, ``eigenvalue_floor``:
        the ``DEFAULT_*`` constants of :mod:`skset.nn.nystrom`).

    References
    ----------
    .. [1] C. Williams, M. Seeger. Using the Nystrom method to speed up kernel machines. NeurIPS 2001.
    .. [2] J. Mairal. End-to-end kernel learning with supervised convolutional kernel networks.
       NeurIPS 2016.
    .. [3] G. Mialon, D. Chen, A. d'Aspremont, J. Mairal. A Trainable Optimal Transport Embedding
       for Feature Aggregation and its Relationship to Attention. ICLR 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from skset import NystromFeatures
    >>> rng = np.random.default_rng(0)
    >>> sets = [rng.normal(size=(n, 3)) for n in (5, 8, 4)]
    >>> nf = NystromFeatures(n_components=6, random_state=0).fit(sets)
    >>> [f.shape for f in nf.transform(sets)]
    [(5, 6), (8, 6), (4, 6)]
    """)
