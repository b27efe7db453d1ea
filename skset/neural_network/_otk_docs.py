"""The docstring sections of the supervised OTK estimators (parameters, attributes, references,
the element masses), shared by :class:`~skset.OTKClassifier` and :class:`~skset.OTKRegressor`."""

_ELEMENT_WEIGHT_FIT_DOC = """
        element_weight : list of 1-D arrays, 2-D array (n_sets, n) or None, default=None
            Mass of each element of each set (one array per set, of the set's length;
            non-negative, finite, not all zero; normalised per set): the set's measure in the
            transport plans of the OTK layer, in training and in the unsupervised initialisation
            (``NystromFeatures`` and ``OTKEmbedding`` fitted with it: in their k-means each set
            keeps its total weight, shared among its elements by mass). With ``window > 1`` a
            k-mer's mass is the mean of the masses of its ``window`` elements. Give the masses
            of the sets you predict to ``predict``, ``predict_proba``, ``decision_function``,
            ``transform`` and ``score`` too (``None`` there means uniform). Uniform masses are
            exactly ``None``. With ``window=1``, an element of mass 0 is an element removed from
            the plans (the Nystrom map is per element), except that it still counts in the
            positions ``i/n`` of ``position_sigma``. Validation errors name the set."""

_ELEMENT_WEIGHT_DOC = """
        element_weight : list of 1-D arrays, 2-D array (n_sets, n) or None, default=None
            Mass of each element of each set of ``X`` (see :meth:`fit`); ``None``: uniform."""


#: the classifier's attributes of its rules (start, epsilon) and of its head's penalty
_CLF_RULE_ATTRS = """    start_scores_ : dict
        Where the ``"auto"`` element map started from the data (single-label classes of two
        sets or more, and the two starts choosing different maps): the cross-validated accuracy
        on the training sets of a logistic head on each start's initial embedding (``"paper"``,
        ``"pipeline"``) and the start kept (``"chosen"``). Absent otherwise.
    epsilon_scores_ : dict
        Where ``epsilon="auto"`` chose from the data (single-label classes of two sets or more):
        the same cross-validated accuracy of the kept start embedded at each epsilon (keys
        ``"0.5"`` and ``"0.1"``) and the one kept (``"chosen"``). Absent otherwise.
    alpha_ : float
        The head's penalty: ``alpha``, or for ``"auto"`` one over the training sets."""

_ALPHA_DOC = """
    alpha : float or "auto", default="auto"
        L2 penalty ``alpha/2 ||W||^2`` on the head's weights, added to the mean loss.
        ``"auto"``: one over the number of training sets (of positive weight), the penalty of
        scikit-learn's multinomial ``LogisticRegression()`` (``C=1``), the head of the pipeline
        this model starts from; set at the first fit (``alpha_``) and kept by warm starts and
        ``partial_fit`` (a warm start back at ``"auto"`` after a float sets it again). On two
        classes the head is a softmax of two rows, both penalised: scikit-learn's binomial
        model at ``C=2``. The loss is the mean over the sets weighted by ``sample_weight`` and
        the class weights, so the weights count relative to each other (scaled all by 2, the
        same head), and the penalty is ``C=1``'s where they average 1."""

# kmer_coding and position_sigma: the classifier's defaults read the order as the pipeline
# does; the regressor keeps the paper's (regression.md)
_CLF_KMER_DOC = """    kmer_coding : {"level_shape", "plain"}, default="level_shape"
        How the Nystrom map reads a k-mer (``window > 1``): ``"level_shape"``, its deviations
        from its own mean, then that mean, as :class:`NystromFeatures` reads k-mers by default;
        ``"plain"``, the concatenated elements (the paper's). The :ref:`otk` guide gives the
        suite figures of both. Without the Nystrom map (``n_components=None``) the k-mers are
        plain.
"""

_CLF_POSITION_DOC = """    position_sigma : float, None or "auto", default="auto"
        Positional weights ``S = exp(-(i/n - j/p)^2 / sigma_pos^2)`` for sequences; None ignores
        order. ``"auto"``: ``position_sigma_`` chosen from the labels on the initial embedding,
        0.3 or ``None``, as :class:`OTKEmbedding` chooses it (positions that beat both none
        and shuffled sets); give ``None`` where the order of the elements must never matter.
"""

_POSITION_MODES_DOC = """
        How ``S`` enters: ``"plan"`` multiplies the plan by ``S`` (the paper, Appendix B.3);
        ``"kernel"`` runs Sinkhorn on ``exp(K / epsilon) * S`` and multiplies the plan by ``S``;
        ``"similarity"`` runs it on ``exp(K * S / epsilon)`` and multiplies the plan by ``S`` (the
        authors' code). See :mod:`skset.nn.otk`. """
_CLF_POSITION_MODE_DOC = ('    position_mode : {"plan", "kernel", "similarity"}, default="kernel"'
                          + _POSITION_MODES_DOC + """``"kernel"``, as :class:`OTKEmbedding`: on
        the suite it raised the trained classifier where positions are chosen (DigitPatches
        92.9 -> 93.5, PickupGestureWiimoteZ's 10-mers given as sets 65.3 -> 71.3, three seeds),
        lowered no row by more than 0.1 on the mean and left the rows without positions as they
        were (user guide, :ref:`otk-defaults`).
""")
_REG_POSITION_MODE_DOC = ('    position_mode : {"plan", "kernel", "similarity"}, default="plan"'
                          + _POSITION_MODES_DOC + """The regressor, which takes no
        positions by default (``position_sigma=None``), keeps the paper's ``"plan"``; the
        classifier's default is ``"kernel"`` (user guide, :ref:`otk-defaults`).
""")

_REG_KMER_DOC = """    kmer_coding : {"plain", "level_shape"}, default="plain"
        How the Nystrom map reads a k-mer (``window > 1``): ``"plain"``, the concatenated
        elements (the paper's); ``"level_shape"``, its deviations from its own mean, then that
        mean, as :class:`NystromFeatures` reads k-mers by default (and :class:`OTKClassifier`):
        on sets of normal samples whose variance is the target it raised the error from 0.12 to
        0.19 of the mean predictor's, hence not the default here (the :ref:`otk` guide gives the
        figures). Without the Nystrom map (``n_components=None``) the k-mers are plain.
"""

_REG_POSITION_DOC = """    position_sigma : float, None or "auto", default=None
        Positional weights ``S = exp(-(i/n - j/p)^2 / sigma_pos^2)`` for sequences; None ignores
        order. ``"auto"``: ``position_sigma_`` chosen from the targets on the initial embedding,
        0.3 or ``None``, as :class:`OTKEmbedding` chooses it (positions that beat both none
        and shuffled sets).
"""

_CLF_EPSILON_DOC = """    epsilon : float or "auto", default="auto"
        Entropic regularisation ``epsilon`` of the transport plans. ``"auto"``: the paper's 0.5,
        unless the start embedded at the pipeline's 0.1 (:class:`OTKEmbedding`'s default)
        classifies the training sets better, by the test that chooses the start (a logistic head
        in stratified cross-validation of up to 5 folds, as many as the smallest class has
        sets; a paired t above 2 over the sets' hits; single-label classes
        of two sets or more; ``epsilon_``, ``epsilon_scores_``).
"""
_REG_EPSILON_DOC = """    epsilon : float, default=0.5
        Entropic regularisation ``epsilon`` of the transport plans.
"""

_DOC_PARAMS = """
    Parameters
    ----------
    n_components : int or None, default=128
        Nystrom anchors ``k`` of the Gaussian kernel on elements (k-mers). ``None`` or 0: no
        Nystrom layer, the OTK layer works on the (k-mers of the) raw elements.
    bandwidth : float or "auto", default="auto"
        Gaussian kernel bandwidth ``sigma`` of the element map, as in :class:`NystromFeatures`
        (relative to the data's scale; an explicit value with ``normalize=True`` is absolute, on
        the unit sphere: the paper's supervised models use 0.5 there, Appendix D.3).
    standardize, normalize, keep_norm : bool or "auto", default="auto"
        The element map's preprocessing, as in :class:`NystromFeatures`. ``"auto"`` chooses them
        (and an ``"auto"`` bandwidth) from the training part of the data and its labels, by the
        same rule as :class:`NystromFeatures` (the validation split of ``early_stopping`` stays
        unseen). ``standardize=True, normalize=True, keep_norm=True, bandwidth=0.5`` is the
        paper's CKN map, where the ``"auto"`` choice starts (:class:`OTKClassifier` may start
        from the pipeline's map instead: ``start_scores_``). ``nystrom_`` holds the map fitted
        at initialisation, with the choice in its ``standardize_``, ``normalize_``,
        ``keep_norm_`` and ``relative_bandwidth_``.
    window : int or "auto", default="auto"
        k-mer width: consecutive elements concatenated before the kernel (10 for proteins in the
        paper). Sets are read as sequences then. ``"auto"``: chosen at initialisation from the
        training labels as :class:`NystromFeatures` chooses it, the paper's map scoring the
        widths (``window_``; 1 without the Nystrom map, ``n_components=None``).
        With the default a series handed over as a set of time points is read as k-mers when
        the labels say its order matters, and unordered bags keep single elements; k-mers of a
        long series cost fit time. ``window=1`` reads no order. The :ref:`otk` guide gives the
        suite figures.
    dilation : int or "auto", default="auto"
        With ``window > 1``: the k-mer's elements are ``dilation`` steps apart (a set shorter
        than the span ``(window - 1) * dilation + 1`` has one k-mer, its last element repeated).
        ``"auto"``: with ``window="auto"``, chosen with the width as :class:`NystromFeatures`
        chooses it (a dilated pair only by a clear margin over the width; ``dilation_``), else 1.
        Without the element map (``n_components=None``) k-mers are contiguous: another value
        than 1 is a ``ValueError``.
""" + _CLF_KMER_DOC + """    n_supports : int, default=10
        Supports per reference ``p``.
    n_references : int, default=1
        References ``q``; the embedding has ``q * p * k`` features.
""" + _CLF_EPSILON_DOC + """    sinkhorn_iter : int, default=10
        Sinkhorn iterations, a fixed count (differentiated through), as in the paper's supervised
        models (10; Appendix D.3). The unsupervised initialisation uses the same fixed count.
""" + _CLF_POSITION_DOC + _CLF_POSITION_MODE_DOC + """    reg_m : float or None, default=None
        Unbalanced transport, as in :class:`OTKEmbedding`: strength :math:`\\rho` of a KL
        penalty that replaces the exact set-side marginal (POT's ``reg_m``, in the units of
        ``epsilon``; the reference side stays exact). Elements of low similarity to every
        support send less than their mass, which makes the embedding robust to outlying
        elements; smaller is more relaxed. Used by the unsupervised initialisation and the
        trained layer alike. ``None``: balanced, every element sends exactly its mass (its
        ``element_weight`` in ``fit`` / ``predict``, uniform by default).
    fit_method : {"kmeans", "wasserstein"}, default="kmeans"
        How :class:`OTKEmbedding` fits the initial references.
    solver : {"alternating", "adam"}, default="alternating"
        ``"alternating"`` is the paper's scheme: before each epoch the linear head is refitted on
        the current embedding (L-BFGS for the logistic loss, closed-form ridge for regression),
        then Adam updates the anchors and references with the head fixed. ``"adam"``: Adam on all
        parameters jointly (the head starts from the fit on the unsupervised embedding). With
        ``partial_fit``, the classifier's ``"alternating"`` holds for the first call only: later
        calls train the head with Adam too, as ``"adam"`` does (a head refitted on each chunk
        alone would forget the other chunks); the regressor's stays in closed form, on the
        sums of every chunk seen (``head_stats_``). Adam's steps, about the learning rate on
        each weight, are large against a ridge head's small weights: with ``"adam"`` a
        regressor's head lags behind its closed form.
    max_iter : int, default=50
        Epochs.
    batch_size : int, default=64
        Most sets per training batch (batches are cut by length, under ``max_elements``).
    learning_rate_init : float, default=0.01
        Adam's learning rate (0.01 in the paper).
    learning_rate : {"adaptive", "constant"}, default="adaptive"
        ``"adaptive"`` halves the learning rate each time the validation loss (the training loss
        without ``early_stopping``) has not decreased by more than ``tol`` (relative to its best
        value in this ``fit``) for 5 consecutive epochs, as in the paper.
    alpha : float or "auto", default="auto"
        L2 penalty ``alpha/2 ||W||^2`` on the head's weights, added to the mean loss.
        ``"auto"``: one over the number of training sets (of positive weight), the penalty of
        scikit-learn's multinomial ``LogisticRegression()`` (``C=1``), the head of the pipeline
        this model starts from; set at the first fit (``alpha_``) and kept by warm starts and
        ``partial_fit`` (a warm start back at ``"auto"`` after a float sets it again). On two
        classes the head is a softmax of two rows, both penalised: scikit-learn's binomial
        model at ``C=2``. The loss is the mean over the sets weighted by ``sample_weight`` and
        the class weights, so the weights count relative to each other (scaled all by 2, the
        same head), and the penalty is ``C=1``'s where they average 1.
    tol, n_iter_no_change : float, int, default=1e-4, 10
        Stopping rule of scikit-learn's MLP (on the training loss, or on the validation score with
        ``early_stopping``), but one epoch sooner: training stops after ``n_iter_no_change``
        epochs in a row that do not improve by more than ``tol`` (scikit-learn's stops after one
        more).
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the training sets (stratified for classifiers;
        with classes of a single set, every class keeps a training set), stop when the
        validation score stalls and restore the best epoch. The held-out sets take no
        part in training, including the unsupervised initialisation of the anchors, references
        and head, and the offset of features far from zero.
    validation_fraction : float, default=0.1
        Held-out fraction for ``early_stopping``.
    warm_start : bool, default=False
        Continue training the fitted model (no new initialisation) on the next ``fit`` (the
        parameters that built the model, and ``class_weight``, must be those of its fit: a
        ``ValueError`` names one changed since; those of training, learning rate and ``alpha``
        included, may change). The rate starts again at ``learning_rate_init``; with
        ``early_stopping`` the best validation score so far is kept: the fit ends with the
        weights it started from unless an epoch beats it. (``partial_fit`` keeps the rate: each
        call is one epoch on its own chunk, whose loss is no measure of progress against another
        chunk's, so the ``"adaptive"`` schedule does not lower it in a stream.)
    verbose : int, default=0
        ``>= 1`` prints one line per epoch.
    max_elements : int, default=131072
        Budget of padded elements per batch (memory bound).
    device : str, default="auto"
        Torch device; ``"auto"`` uses CUDA when available.
    dtype : {"float32", "float64"}, default="float32"
        Compute dtype.
    random_state : int, RandomState or None, default=None
        Seeds the unsupervised initialisation, the validation split and the batch order.
"""

_DOC_PARAMS_REGRESSION = _DOC_PARAMS.replace(_CLF_EPSILON_DOC, _REG_EPSILON_DOC).replace(
    _CLF_KMER_DOC, _REG_KMER_DOC).replace(
    _CLF_POSITION_DOC, _REG_POSITION_DOC).replace(
    _CLF_POSITION_MODE_DOC, _REG_POSITION_MODE_DOC).replace(
    _ALPHA_DOC.lstrip("\n") + "\n", """    alpha : float or "auto", default="auto"
        L2 penalty ``alpha/2 ||W||^2`` on the head's weights, added to the mean loss (on
        standardised targets). ``"auto"``: chosen when the head is first fitted, on the
        unsupervised embedding of the training part, by exact leave-one-out (closed form from one
        SVD) over ``10^-6 ... 10^3`` (19 values) and an infinite penalty (a zero head: the
        training mean), with the one-standard-error rule (the largest penalty whose
        leave-one-out error is within one standard error of the paired per-set differences from
        the lowest); kept for the rest of training (``alpha_``) and by warm starts, chosen
        again by a warm start back at ``"auto"`` after a float. A target the embedding does not
        predict then gets the mean, whose zero head also leaves the anchors and references
        untrained.
""").replace(
    """    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the training sets (stratified for classifiers;
        with classes of a single set, every class keeps a training set), stop when the
        validation score stalls and restore the best epoch. The held-out sets take no
        part in training, including the unsupervised initialisation of the anchors, references
        and head, and the offset of features far from zero.
""", """    early_stopping : bool or "auto", default=False
        Hold out ``validation_fraction`` of the training sets, stop when the validation R^2
        stalls and restore the best epoch, then scale the head (in standardised units: towards
        the training mean) by a factor in [0, 1] chosen on the held-out sets
        (``output_shrinkage_``): the least-squares factor, clipped, times ``max(0, 1 - 1/t^2)``
        with ``t`` its own t-statistic. The held-out sets take no part in training, including
        the unsupervised initialisation of the anchors, references and head (the targets are
        scaled on every set: a factor of 0 predicts the mean of all of them). ``"auto"``: on
        for fits of 20 to 999 sets, with at least 10 sets held out; off otherwise (the default
        of the Set Transformer and Deep Sets regressors). The default ``False`` leaves the guard
        to the penalty ``alpha="auto"`` chooses on every training set (why: user guide,
        :ref:`regression-few-sets`).
""")
assert "alpha : float or \"auto\"" in _DOC_PARAMS_REGRESSION
assert "early_stopping : bool or \"auto\", default=False" in _DOC_PARAMS_REGRESSION

_DOC_ATTRS = """
    nystrom_ : NystromFeatures or None
        The unsupervised Nystrom map the anchors were initialised from.
    window_ : int
        The k-mer width used: ``window``, or the one chosen for ``"auto"``.
    dilation_ : int
        The k-mer dilation used: ``dilation``, or the one chosen for ``"auto"``.
    position_sigma_ : float or None
        The positional width used: ``position_sigma``, or the one chosen for ``"auto"``.
    epsilon_ : float
        The entropic regularisation used: ``epsilon``, or the one chosen for ``"auto"``.
    embedding_ : OTKEmbedding
        The unsupervised embedding the references were initialised from.
    input_offset_ : ndarray of shape (n_features,) or None
        Subtracted from every element (in float64) before the network reads it: in float32, the
        training mean of each feature more than 1e3 standard deviations from zero (whose
        variation float32 would round away; an offset of 1e8 leaves steps of 8), 0 for the
        others; None when no feature is so far (and always in float64).
    module_ : torch.nn.Module
        The trained network (``module_.element_map``: the Nystrom layer, or the k-mers
        without one; ``module_.otk``, ``module_.head``).
    loss_curve_ : list of float
        Mean training loss per epoch.
    validation_scores_ : list of float
        Validation score per epoch (with ``early_stopping``).
    best_validation_score_ : float or None
        Best validation score, that of the weights kept (with ``early_stopping``; None after a
        fit or ``partial_fit`` that trained without a validation split).
    learning_rates_ : list of float
        Adam's learning rate at the end of each epoch.
    n_iter_ : int
        Epochs run (summed over warm starts).
    n_features_in_ : int
        Features per element.
    device_ : torch.device
        Resolved device.
    dtype_ : torch.dtype
        Resolved compute dtype (``dtype``).
"""

_DOC_REFS = """
    References
    ----------
    .. [1] G. Mialon, D. Chen, A. d'Aspremont, J. Mairal. A Trainable Optimal Transport Embedding
       for Feature Aggregation and its Relationship to Attention. ICLR 2021 (Section 2.2,
       Appendix D.3).
    .. [2] J. Mairal. End-to-end kernel learning with supervised convolutional kernel networks.
       NeurIPS 2016.
"""


def _with_element_weight(summary: str) -> str:
    return summary + """

        Parameters
        ----------
        X : collection of sets""" + _ELEMENT_WEIGHT_DOC + """
        """


#: the parts of OTKRegressor's docstring (compose_doc joins them)
REGRESSOR_DOC_PARTS = (
    """Supervised optimal transport kernel embedding with a linear regressor, trained end to end.

    The regression counterpart of :class:`OTKClassifier`: the same Nystrom -> OTK network, a
    linear head on standardised targets with the squared loss (refitted in closed form, ridge, by
    the ``"alternating"`` solver).
""",
    _DOC_PARAMS_REGRESSION,
    """
    Attributes
    ----------
    y_mean_, y_scale_ : ndarray of shape (n_outputs,)
        Target standardisation.
    alpha_ : float
        The head's penalty (``alpha``, or the one ``"auto"`` chose; ``inf``: the mean).
    output_shrinkage_ : float or ndarray of shape (n_outputs,)
        The factor the output layer was scaled by after a fit with a validation split (1.0
        without one); one per output with several outputs, each chosen on its own column. It
        scales the predictions only: a warm start or ``partial_fit`` trains from the output as
        training left it.
    head_stats_ : dict of Tensor
        After ``partial_fit`` (``"alternating"`` solver): the sums of the ridge head's normal
        equations over every chunk seen (float64; ``total``, their weight), each chunk's taken
        on the embedding its call ended with. Each call trains the anchors and references on
        its chunk with Adam and refits the head in closed form on these sums with the chunk's,
        so the head is the ridge of all the chunks, not of the last one. ``fit`` starts no
        stream: a ``partial_fit`` after it refits the head on the chunks from then on.""",
    _DOC_ATTRS,
    """
    See Also
    --------
    OTKClassifier : the classifier.
    OTKEmbedding, NystromFeatures : the unsupervised pipeline this model starts from.
""",
    _DOC_REFS,
    """
    Examples
    --------
    >>> import numpy as np
    >>> from skset import OTKRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = [rng.normal(size=(n, 3)) for n in rng.integers(5, 15, size=30)]
    >>> y = np.array([s[:, 0].max() for s in X])
    >>> reg = OTKRegressor(n_components=8, n_supports=3, max_iter=2, random_state=0,
    ...                    device="cpu").fit(X, y)
    >>> reg.predict(X[:3]).shape
    (3,)
""",
)
