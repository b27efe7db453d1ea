"""The docstring of :class:`~skset.OTKEmbedding` (parameters, attributes, notes, examples),
kept beside the estimator's code so that each stays readable."""

OTK_EMBEDDING_DOC = (
    r"""Optimal transport kernel embedding (OTKE) of sets, with references learned without labels.

    Each set :math:`\mathbf{x} = (x_1..x_n)` is aligned to ``n_references`` references
    :math:`\mathbf{z}^{(r)} \in \mathbb{R}^{p \times d}` by the entropic transport plan
    :math:`\mathbf{P}` (uniform weights :math:`1/n` on the set, or the normalised
    ``element_weight`` of ``fit`` / ``transform``; :math:`1/p` on the references; similarity
    :math:`\langle x_i, z_j\rangle`), and each support pools the elements transported to it
    (Mialon et al. 2021, eq. 3 and 8):

    .. math:: \Phi(\mathbf{x}) = \frac{1}{\sqrt{q}}\Big(\sqrt{p}\;
              \mathbf{P}(\mathbf{x}, \mathbf{z}^{(r)})^\top \mathbf{x}\Big)_{r=1..q}
              \in \mathbb{R}^{q p d}.

    The embedding is a weighted match kernel whose weights come from optimal transport: elements
    that align with the same part of the reference are pooled together. Put it after
    :class:`NystromFeatures` to use a Gaussian kernel on the elements.

    Parameters
    ----------
    n_supports : int, default=10
        Supports per reference ``p``. At most the number of distinct training elements: above it,
        ``fit`` warns and uses that many (``n_supports_``), as :class:`NystromFeatures` does for
        its anchors, rather than duplicate supports that would only repeat output features.
    n_references : int, default=1
        Number of references ``q``. With several, they are fitted by Wasserstein k-means (Mialon
        et al. 2021, Section 2): each training set is assigned to the reference with the lowest
        transport cost :math:`\sum_{ij} P_{ij} \|x_i - z_j\|^2`, and each reference is refitted
        on its sets. ``P`` is the plan the embedding uses (before positional weights): the
        entropic plan of similarity :math:`\langle x_i, z_j\rangle` at ``epsilon``, which is the
        entropic plan of the squared Euclidean cost at ``2 * epsilon``. (Taking the largest
        :math:`\langle P, K\rangle` instead would favour references of large norm.)
    epsilon : float, default=0.1
        Entropic regularisation ``epsilon`` of the plan, relative to the features' scale: small
        values (0.01 to 0.1) give sharp, nearly one-to-one alignments, large ones (1 to 10)
        tend to mean pooling; 0.1 to 1 is the usual grid (the paper's: 0.01 to 1). Any value
        from 1e-3 to 10 is computed stably; smaller values need more Sinkhorn iterations
        (``sinkhorn_tol``). :class:`skset.nn.OTKLayer` and ``OTKRegressor`` keep 0.5, and
        ``OTKClassifier`` chooses 0.5 or 0.1: they run a fixed 10 iterations, which converge at
        0.5 but not always at 0.1. How the default was chosen: :ref:`otk-defaults` (user guide).
    sinkhorn_iter : int, default=3000
        Most Sinkhorn iterations per plan (the cap of the ``sinkhorn_tol`` rule; the exact count
        when ``sinkhorn_tol=None``); at least 1. Small ``epsilon`` and sets with heavy-tailed
        element norms can need thousands of iterations to converge, easy sets a few tens (the
        paper: 100 for its unsupervised embedding, 10 in its supervised models, App. D.3).
    sinkhorn_tol : float or None, default=1e-4
        Sinkhorn stopping tolerance on each plan's row-marginal error
        :math:`\sum_i |\sum_j P_{ij} - 1/n|` (between 0 and 2; the column marginals hold
        exactly), checked every 5 iterations, set by set (see :func:`skset.ot.sinkhorn`). Easy
        sets stop after 5 to a few tens of iterations, hard ones (small ``epsilon`` relative to
        the features' scale, heavy-tailed norms) run up to ``sinkhorn_iter``. Float32 rounding
        floors the error near 1e-6..1e-5: smaller values run to the cap. How far the default
        stops from a converged plan: :ref:`otk-defaults` in the user guide.
        ``None``: exactly ``sinkhorn_iter`` iterations (the paper's fixed count).
    fit_method : {"kmeans", "wasserstein"}, default="kmeans"
        How references are fitted: k-means on the elements of the training sets, or the
        free-support Wasserstein barycenter of the training sets (a fixed point on the Sinkhorn
        plans started from the k-means solution).
    position_sigma : float, None or "auto", default="auto"
        Positional weighting for ordered sets (sequences), with
        :math:`S_{ij} = \exp(-(i/n - j/p)^2/\sigma_{pos}^2)` (``n`` the set's length, ``i``, ``j``
        from 0); ``position_mode`` says how. ``None`` ignores order. Any positive finite value
        is computed safely: a huge one (1e300) is no positional weighting, a tiny one (1e-300)
        the limit of a vanishing bandwidth (weight 1 where :math:`i/n = j/p`, 0 elsewhere).
        ``"auto"``: ``position_sigma_`` chosen in ``fit`` from the labels ``y``, 0.3 or
        ``None``. Positions are taken only when, on the training sets, they beat both no
        positions and the same positions on the sets with their elements shuffled, by more than
        noise; without labels (``fit(X)``), with per-element or multi-output labels, or when no
        set has two elements: ``None``, and the fit is exactly the ``position_sigma=None`` fit.
        The choice reads the order of the elements of each set: on unordered bags it keeps
        ``None`` unless the draw of the sets' order happens to pass both tests (once in 400
        random bags). The :ref:`otk` guide ("Positions chosen from the data") gives the rule
        and the suite figures.
    position_mode : {"plan", "kernel", "similarity"}, default="kernel"
        How the positional weights enter the plan (see :mod:`skset.nn.otk`):
        ``"plan"``: :math:`\mathbf{P}(K) \odot S`, the plan multiplied by ``S`` after Sinkhorn
        (the paper, Appendix B.3); ``"kernel"``: Sinkhorn on the Gibbs kernel
        :math:`e^{K/\varepsilon} \odot S` (the cost plus
        :math:`\varepsilon (i/n - j/p)^2/\sigma_{pos}^2`), so the plan itself follows positions,
        then :math:`\odot S`; ``"similarity"``: Sinkhorn on :math:`e^{(K \odot S)/\varepsilon}`
        then :math:`\odot S`, what the authors' code does. Ignored without ``position_sigma``.
        How the default was chosen: :ref:`otk-defaults` in the user guide.
    reg_m : float or None, default=None
        Unbalanced transport: strength :math:`\rho` of a KL penalty that replaces the exact
        set-side marginal (POT's ``reg_m``, in the units of ``epsilon``; the reference side stays
        exact, so every support still pools mass ``1/p``; see :mod:`skset.ot`). Elements of low
        similarity to every support then send less than their mass (the others more), which
        makes the embedding robust to outlying elements; smaller is more relaxed (the row update's exponent is
        :math:`\rho / (\rho + \varepsilon)`). ``None``: balanced, every element sends exactly
        its mass. Its plans read the features as they are (no ``input_offset_``): standardise
        features far from zero first, or use float64 (a float32 fit warns).
    center : bool, default=True
        Subtract the mean training embedding from every output.
    normalize : bool, default=True
        Scale every output (after centring) to norm ``sqrt(n_features_out)``, i.e. unit average
        squared value per feature, which suits linear models with their default regularisation.
        An output that is within the computation's accuracy of 0 after centring (a set equal
        to the mean embedding, e.g. the training set of a fit on one set, or a permutation of
        it) is set to 0 rather than scaled up: rounding noise would otherwise become an
        arbitrary direction of norm ``sqrt(n_features_out)``, and the embedding would not be
        permutation invariant. The accuracy is ``1000 * eps`` (of ``dtype``) times the size of
        the raw embedding and of ``mean_``, plus ``10 * sinkhorn_tol`` times the raw embedding's
        spread over the supports (the plan is accurate to about the tolerance, and its errors
        move mass between supports).
    barycenter_iter : int, default=10
        Iterations of the Wasserstein barycenter / Wasserstein k-means (``max_iter`` before
        0.2); a barycenter still moving at the cap warns (``ConvergenceWarning``).
    max_samples : int or "auto", default="auto"
        Elements sampled for k-means (at least ``n_supports``). ``"auto"``: 100,000, fewer for
        wide elements: at most 2^25 values in the sample (as :class:`skset.NystromFeatures`).
    sinkhorn_method : {"auto", "log", "exp"}, default="auto"
        Sinkhorn solver, see :func:`skset.ot.sinkhorn`. ``"exp"`` alone can end on a NaN plan
        (a ``ValueError``) or, with no error, on a finite plan whose marginals are right but
        whose entries are off, at small ``epsilon`` in float32 (0.05 on standardised features);
        ``"auto"`` and ``"log"`` do not.
    max_elements : int, default=32768
        Budget of padded elements per batch: sets are sorted by length and cut into batches of at
        most this many padded elements, which bounds memory (a longer set gets a batch of its
        own). Small batches are also faster on a CPU (their cost and plan matrices stay in
        cache); 8192 to 131072 are reasonable, and on a GPU a larger budget may pay off. How the
        default was chosen: :ref:`otk-defaults` in the user guide.
    target_type : {"auto", "continuous", "binary", "multiclass"}, default="auto"
        How the ``y`` of ``fit`` is read by ``position_sigma="auto"`` (scikit-learn's
        ``TargetEncoder`` names): ``"continuous"``, real targets whatever their values (pass it
        before a regressor whose targets are whole numbers); ``"binary"`` or ``"multiclass"``,
        classes whatever their values; ``"auto"``, ``sklearn.utils.multiclass.type_of_target``,
        except that whole numbers of which most sets hold a value of their own are read as real
        targets.
    device : str, default="auto"
        Torch device; ``"auto"`` uses CUDA when available.
    dtype : {"float32", "float64"}, default="float32"
        Compute and output dtype.
    random_state : int, RandomState or None, default=None
        Seed for k-means and the reference initialisation.

    Attributes
    ----------
    references_ : ndarray of shape (n_references, p, n_features) with p = ``n_supports_``
        The references ``z``.
    n_supports_ : int
        Supports per reference used: ``n_supports``, or the number of distinct training elements
        when that is smaller. The output has ``n_references * n_supports_ * n_features_in_``
        features.
    mean_ : ndarray of shape (n_features_out,)
        Mean training embedding (zeros when ``center=False``).
    input_offset_ : ndarray of shape (n_features,) or None
        The training mean of each feature more than 10 spreads from zero (0 for the others),
        subtracted in float64 from every set before the plans read it (a shift of sets and
        references leaves converged plans unchanged; float32 products of such features lose
        their digits). ``references_`` and a centring ``mean_`` stay in the input space, in
        float64. None when no feature is that far, and with ``reg_m`` or similarity-scaled
        positions, whose plans a shift changes. ``to_module()`` reads the sets less it too.
    position_sigma_ : float or None
        The positional width used: ``position_sigma``, or the one chosen for ``"auto"``.
    position_scores_ : dict or None
        What ``position_sigma="auto"`` scored (minus the mean leave-one-out error of a ridge
        model on the training embeddings; higher is better): ``"none"``, ``"positions"`` and,
        when positions beat none, ``"shuffled"`` (the control); ``None`` when nothing was
        scored (explicit ``position_sigma``, no usable labels).
    assignments_ : ndarray of shape (n_training_sets,)
        Reference of each training set (zeros with one): of lowest transport cost, except that
        ``fit`` gives a reference no set chose the set its own fits worst; after ``partial_fit``,
        of that call's sets.
    n_iter_ : int
        Barycenter / Wasserstein k-means iterations run (by ``fit`` or the first
        ``partial_fit``; with several references, summed over them and the rounds).
    counts_ : ndarray of shape (n_references, p)
        Weight assigned to each support so far (the counts of ``partial_fit``'s updates): of
        the training elements nearest to it among its reference's sets
        (``fit_method="kmeans"``), or of its reference's sets (``"wasserstein"``).
    n_samples_seen_ : float
        Total weight of the training sets seen (their number without ``sample_weight``).
    n_steps_ : int
        Chunks the references were fitted on: 1 after ``fit`` or the first ``partial_fit``,
        plus one per later ``partial_fit`` call.
    n_features_in_ : int
        Features per element.
    device_ : torch.device
        Resolved device.
    dtype_ : torch.dtype
        Resolved compute dtype (``dtype``).

    Notes
    -----
    ``fit(X, sample_weight=..., element_weight=...)``: ``sample_weight`` weighs the sets (a set
    of weight 2 counts as the set given twice in every objective, though k-means' random start
    may then reach another local optimum than the repeated sets' do; one of weight 0 is the set
    left out, exactly), in the
    k-means of the elements, the set-mean k-means that starts several references, the
    barycenter and the mean embedding of ``center``. ``element_weight`` (one 1-D array per set,
    normalised per set) is each set's measure in every transport plan; in the k-means of the
    elements each set keeps its total weight (``n_i``, its elements of positive mass, times its
    ``sample_weight``), shared among them in proportion to ``element_weight``, so uniform element
    weights give exactly the unweighted fit, and an element of mass 0 is a removed element.

    The references and ``mean_`` are fitted with ``epsilon``, ``position_sigma``,
    ``position_mode`` and ``reg_m``: changed by ``set_params`` after a fit (or ``center=True``
    set on a fit without it, whose ``mean_`` is zeros), ``transform``, ``partial_fit`` and
    ``to_module`` raise a ``ValueError`` naming them until the next ``fit``. The output
    switches ``center=False`` and ``normalize``, the Sinkhorn cap, tolerance and method,
    ``max_elements`` and ``device`` may change between calls.

    See Also
    --------
    NystromFeatures : element-wise Gaussian kernel features to use before this embedding.
    skset.nn.OTKLayer : the same embedding as a trainable torch module.
    skset.ot.sinkhorn : the batched Sinkhorn solver.

    References
    ----------
    .. [1] G. Mialon, D. Chen, A. d'Aspremont, J. Mairal. A Trainable Optimal Transport Embedding
       for Feature Aggregation and its Relationship to Attention. ICLR 2021.
    .. [2] M. Cuturi, A. Doucet. Fast Computation of Wasserstein Barycenters. ICML 2014.

    Examples
    --------
    >>> import numpy as np
    >>> from skset import OTKEmbedding
    >>> rng = np.random.default_rng(0)
    >>> sets = [rng.normal(size=(n, 4)) for n in (6, 9, 3, 7)]
    >>> otk = OTKEmbedding(n_supports=3, random_state=0).fit(sets)
    >>> otk.transform(sets).shape
    (4, 12)
    """)
