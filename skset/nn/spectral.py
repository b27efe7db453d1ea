r"""Batched spectral clustering on padded stacks of affinity matrices.

Everything here works on a stack of ``B`` affinity matrices ``A`` of shape ``(B, n_max, n_max)``
with a boolean mask ``(B, n_max)`` (``True`` on real nodes); padded rows and columns are ignored.

Conventions (shared with :func:`skset.cluster.estimate_n_clusters`):

* **Laplacian.** The symmetric normalised Laplacian :math:`L = I - D^{-1/2} A D^{-1/2}` with
  degrees :math:`d_i = \sum_j A_{ij}` that **include the diagonal** :math:`A_{ii}` (the affinity of
  an element with itself: 1 for an RBF kernel and for the ideal same-cluster matrix). With
  self-loops, an ideal block matrix with ``k`` blocks has the spectrum ``0`` (``k`` times) and
  ``1`` (the rest) whatever the block sizes, and a singleton with near-zero affinity to the rest
  still counts as a cluster. (scikit-learn's ``spectral_embedding`` drops the diagonal instead;
  there a singleton's few tiny edges dominate its normalised row and it is not seen as a cluster.)
  A node of degree 0 gets a zero row in ``L`` (eigenvalue 0: a cluster of its own).
* **Padding.** Padded node ``j`` of ``n_max`` gets ``L_jj = 3 + j / n_max`` and no edges, so ``L``
  is block diagonal and the real block's eigenvalues (all in ``[0, 2]``) are untouched; the padded
  eigenvalues (distinct, in ``[3, 4)``) sort last and are dropped. Distinct, so that gradients
  through the eigenvectors stay finite: ``torch.linalg.eigh``'s backward divides by eigenvalue
  gaps, and a gap of 0 between two padded eigenvalues made every gradient of the set NaN.
* **Eigengap.** With eigenvalues :math:`0 \le \lambda_1 \le \dots \le \lambda_n` of ``L`` and a
  virtual :math:`\lambda_{n+1} = 1` (the value that the non-zero eigenvalues take for an ideal
  block matrix, which makes ``k = n`` possible, e.g. for the identity matrix),
  :math:`k = \arg\max_{c \le i \le K} (\lambda_{i+1} - \lambda_i)`, where ``c >= 1`` is the number
  of (numerically) zero eigenvalues -- the number of connected components, a lower bound on ``k``
  -- and ``K = min(max_clusters, n)``. When ``c >= K`` the answer is ``K``. Ties (gaps within
  ``1e-8``, or ``1e-4`` in float32, of the largest) go to the smallest ``k``; the same tolerance
  decides which eigenvalues are zero. So one cluster is a possible answer (unlike
  Google's ``spectralcluster``), ``n = 1`` gives 1, and for ``n = 2`` the answer is 2 exactly when
  the off-diagonal affinity is below a third of the diagonal one.
* **Embedding.** The eigenvectors of the ``k`` smallest eigenvalues, rows normalised to unit
  length (Ng, Jordan and Weiss, 2002), then k-means (batched Lloyd iterations with k-means++
  seeding and several restarts).
"""

from __future__ import annotations

import numbers

import torch

from ._masks import as_mask


def _count(name: str, value, allow_none: bool = False):
    """``value`` checked as a count: an int >= 1 (or an int tensor of them; ``None`` where
    allowed), else a ``ValueError`` naming it (a torch error or a count of 0 or -1 before)."""
    if value is None and allow_none:
        return None
    if isinstance(value, torch.Tensor) and not value.is_floating_point() \
            and value.dtype != torch.bool:
        if value.numel() and int(value.min()) < 1:
            raise ValueError(f"{name} must be at least 1, got {value.tolist()}")
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1{' or None' if allow_none else ''}, "
                         f"got {value!r}")
    return int(value)

__all__ = [
    "normalized_laplacian",
    "laplacian_eigh",
    "eigengap_n_clusters",
    "threshold_n_clusters",
    "spectral_embedding",
    "batched_kmeans",
    "spectral_cluster",
]

_PAD_EIGENVALUE = 3.0  # the first padded node's; node j of n_max: 3 + j / n_max


def _tol(dtype: torch.dtype) -> float:
    # eigenvalues this close to 0 count as zero, gaps this close to the largest count as ties
    return 1e-8 if dtype == torch.float64 else 1e-4


def normalized_laplacian(affinity: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Symmetric normalised Laplacian (diagonal in the degrees); padded node ``j`` of ``n`` is
    ``3 + j / n`` on the diagonal (distinct eigenvalues above the real ones, see the module doc).

    Parameters
    ----------
    affinity : Tensor of shape (B, n, n)
        Symmetric non-negative affinities; padded rows and columns may hold anything.
    mask : bool Tensor of shape (B, n) or None
        ``True`` on real nodes; ``None`` means all real.
    """
    if not isinstance(affinity, torch.Tensor) or affinity.dim() != 3 \
            or affinity.shape[1] != affinity.shape[2] or not affinity.is_floating_point():
        raise ValueError("affinity must be a float tensor of shape (B, n, n), got "
                         f"{getattr(affinity, 'dtype', type(affinity).__name__)} of shape "
                         f"{tuple(getattr(affinity, 'shape', ()))}")
    mask = as_mask(mask, affinity)
    B, n, _ = affinity.shape
    if mask is None:
        mask = torch.ones(B, n, dtype=torch.bool, device=affinity.device)
    # torch.where, not a product with the mask: padded entries may hold anything (NaN * 0 is NaN)
    pair = mask[:, :, None] & mask[:, None, :]
    A = torch.where(pair, affinity, torch.zeros((), dtype=affinity.dtype, device=affinity.device))
    deg = A.sum(-1)
    d_is = torch.where(deg > 0, deg.clamp_min(torch.finfo(A.dtype).tiny).rsqrt(),
                       torch.zeros_like(deg))
    M = d_is[:, :, None] * A * d_is[:, None, :]
    # real nodes: 1 on the diagonal (0 for isolated ones); padded nodes: distinct sentinels
    pad = _PAD_EIGENVALUE + torch.arange(n, device=A.device, dtype=A.dtype) / n
    diag = torch.where(mask, (deg > 0).to(A.dtype), pad.expand(B, n))
    return torch.diag_embed(diag) - M


def laplacian_eigh(affinity: torch.Tensor, mask: torch.Tensor | None = None,
                   eigenvectors: bool = True):
    """Ascending eigenvalues (and eigenvectors) of :func:`normalized_laplacian`.

    Real eigenvalues come first (clipped to ``[0, 2]``); the padded ones (in ``[3, 4)``) last.
    """
    mask = as_mask(mask, affinity)
    L = normalized_laplacian(affinity, mask)
    if eigenvectors:
        w, V = torch.linalg.eigh(L)
    else:
        w, V = torch.linalg.eigvalsh(L), None
    if mask is not None:
        real = torch.arange(L.shape[-1], device=L.device)[None, :] < mask.sum(1, keepdim=True)
        w = torch.where(real, w.clamp(0.0, 2.0), w)
    else:
        w = w.clamp(0.0, 2.0)
    return (w, V) if eigenvectors else w


def eigengap_n_clusters(eigenvalues: torch.Tensor, lengths: torch.Tensor,
                        max_clusters: int | torch.Tensor | None = None,
                        min_clusters: int | None = None) -> torch.Tensor:
    """Number of clusters from ascending Laplacian eigenvalues, per instance (see module doc).

    Parameters
    ----------
    eigenvalues : Tensor of shape (B, n_max)
        Ascending; the first ``lengths[b]`` entries of row ``b`` are the real ones.
    lengths : int Tensor of shape (B,)
        Number of real nodes per instance (>= 1).
    max_clusters : int, int Tensor of shape (B,) or None
        Upper bound on ``k``; ``None`` means ``n``.
    min_clusters : int or None
        Lower bound on ``k`` (capped at ``n`` and ``max_clusters``): the largest gap is sought
        among ``k >= min_clusters`` only. ``None`` means 1.

    Returns
    -------
    k : int64 Tensor of shape (B,)
    """
    max_clusters = _count("max_clusters", max_clusters, allow_none=True)
    min_clusters = _count("min_clusters", min_clusters, allow_none=True)
    if not bool(torch.isfinite(eigenvalues).all()):
        raise ValueError("eigenvalues hold NaN or infinity (an affinity that was not finite)")
    if min_clusters is not None and int(min_clusters) > 1:
        # the unrestricted answer, raised where it falls below the bound
        k = eigengap_n_clusters(eigenvalues, lengths, max_clusters)
        return _raise_to_min(eigenvalues, lengths, max_clusters, int(min_clusters), k)
    B, n_max = eigenvalues.shape
    dev = eigenvalues.device
    lengths = lengths.to(device=dev, dtype=torch.long)
    if max_clusters is None:
        K = lengths
    else:
        K = torch.minimum(torch.as_tensor(max_clusters, device=dev, dtype=torch.long)
                          .expand(B), lengths)
    idx = torch.arange(n_max + 1, device=dev)[None, :]  # 0-based position i -> lambda_{i+1}
    lam = torch.cat([eigenvalues, eigenvalues.new_ones(B, 1)], dim=1)
    # the virtual lambda_{n+1} = 1 sits right after the last real eigenvalue
    lam = torch.where(idx == lengths[:, None], torch.ones_like(lam), lam)
    real = idx < lengths[:, None]
    tol = _tol(eigenvalues.dtype)
    n_zero = ((lam <= tol) & real).sum(1).clamp_min(1)
    gaps = lam[:, 1:] - lam[:, :-1]  # gaps[:, i-1] = lambda_{i+1} - lambda_i, candidate k = i
    k_cand = torch.arange(1, n_max + 1, device=dev)[None, :]
    ok = (k_cand >= n_zero[:, None]) & (k_cand <= K[:, None])
    gaps = torch.where(ok, gaps, torch.full_like(gaps, -float("inf")))
    best = gaps.max(1, keepdim=True).values
    near = ok & (gaps >= best - tol)
    k = torch.where(near, k_cand.expand(B, -1), torch.full_like(gaps, n_max + 1,
                                                                 dtype=torch.long)).min(1).values
    return torch.where(n_zero >= K, K, k)


def _bounds(eigenvalues, lengths, max_clusters, min_clusters):
    B = eigenvalues.shape[0]
    dev = eigenvalues.device
    lengths = lengths.to(device=dev, dtype=torch.long)
    K = lengths if max_clusters is None else torch.minimum(
        torch.as_tensor(max_clusters, device=dev, dtype=torch.long).expand(B), lengths)
    lo = torch.minimum(torch.full_like(K, max(int(min_clusters or 1), 1)), K)
    return lengths, K, lo


def _raise_to_min(eigenvalues, lengths, max_clusters, min_clusters, k):
    """The eigengap restricted to ``k >= min_clusters``: where the unrestricted answer is below
    the bound, the largest gap among the allowed ``k`` (ties: the smallest)."""
    B, n_max = eigenvalues.shape
    dev = eigenvalues.device
    lengths, K, lo = _bounds(eigenvalues, lengths, max_clusters, min_clusters)
    idx = torch.arange(n_max + 1, device=dev)[None, :]
    lam = torch.cat([eigenvalues, eigenvalues.new_ones(B, 1)], dim=1)
    lam = torch.where(idx == lengths[:, None], torch.ones_like(lam), lam)
    gaps = lam[:, 1:] - lam[:, :-1]
    k_cand = torch.arange(1, n_max + 1, device=dev)[None, :]
    ok = (k_cand >= lo[:, None]) & (k_cand <= K[:, None])
    gaps = torch.where(ok, gaps, torch.full_like(gaps, -float("inf")))
    best = gaps.max(1, keepdim=True).values
    near = ok & (gaps >= best - _tol(eigenvalues.dtype))
    k_lo = torch.where(near, k_cand.expand(B, -1), torch.full_like(gaps, n_max + 1,
                                                                    dtype=torch.long)).min(1).values
    return torch.where(k < lo, k_lo, k)


def threshold_n_clusters(eigenvalues: torch.Tensor, lengths: torch.Tensor, threshold: float,
                         max_clusters: int | torch.Tensor | None = None,
                         min_clusters: int | None = None) -> torch.Tensor:
    """Number of clusters as the count of Laplacian eigenvalues below ``threshold``.

    For an ideal ``k``-block affinity the normalised Laplacian has ``k`` zero eigenvalues and the
    rest at 1; a learned kernel that is not yet sharp lifts the ``k`` small ones (the more
    clusters, the higher: on 2-5 circles the ``k``-th eigenvalue averaged 0.05 / 0.15 / 0.39 /
    0.59 for ``k`` = 2..5) while the next one stays near 0.8-0.9, so the largest gap is often an
    earlier one and the eigengap under-counts. A count below a threshold calibrated on labelled
    instances (:class:`skset.ABCClusterer` does this on its validation instances) avoids that.
    The count is clipped to ``[min_clusters, min(max_clusters, n)]``.

    Parameters
    ----------
    eigenvalues : Tensor of shape (B, n_max)
        Ascending; the first ``lengths[b]`` entries of row ``b`` are the real ones.
    lengths : int Tensor of shape (B,)
    threshold : float
    max_clusters, min_clusters : int or None
        Bounds on ``k`` (``None``: ``n`` and 1).

    Returns
    -------
    k : int64 Tensor of shape (B,)
    """
    n_max = eigenvalues.shape[1]
    max_clusters = _count("max_clusters", max_clusters, allow_none=True)
    min_clusters = _count("min_clusters", min_clusters, allow_none=True)
    lengths, K, lo = _bounds(eigenvalues, lengths, max_clusters, min_clusters)
    real = torch.arange(n_max, device=eigenvalues.device)[None, :] < lengths[:, None]
    k = ((eigenvalues < float(threshold)) & real).sum(1)
    return torch.maximum(torch.minimum(k, K), lo)


def spectral_embedding(eigenvectors: torch.Tensor, mask: torch.Tensor | None,
                       n_clusters: torch.Tensor) -> torch.Tensor:
    """Rows of the first ``k_b`` eigenvectors, normalised to unit length; shape (B, n, k_max).

    Columns ``j >= k_b`` and padded rows are zero.
    """
    mask = as_mask(mask, eigenvectors)
    B, n, _ = eigenvectors.shape
    k_max = int(n_clusters.max())
    U = eigenvectors[:, :, :k_max]
    cols = torch.arange(k_max, device=U.device)[None, None, :] < n_clusters[:, None, None]
    U = U * cols
    if mask is not None:
        U = U * mask[:, :, None]
    norm = U.norm(dim=-1, keepdim=True)
    return U / norm.clamp_min(1e-12)


def _seeding_draws(generator, n_init: int, n_centres: int, B: int, device) -> torch.Tensor:
    """``(n_centres, B * n_init)`` uniform draws in ``[0, 1)``: row ``j`` for centre ``j``, column
    ``b * n_init + r`` reading draw ``r`` of that row, the same for every instance. Drawn row by
    row, ``n_init`` at a time, from a CPU generator seeded with one number of ``generator``
    (``None``: the global RNG), then moved to ``device`` once, so that no instance's draws depend
    on the batch's size, its largest ``k`` or the device."""
    src = (torch.randint(0, 2**62, (1,), generator=generator, device=generator.device)
           if generator is not None else torch.randint(0, 2**62, (1,), device="cpu"))
    host = torch.Generator(device="cpu").manual_seed(int(src))
    U = torch.stack([torch.rand(n_init, generator=host, dtype=torch.float64, device="cpu")
                     for _ in range(n_centres)])
    return U.to(device).repeat(1, B)


def _inverse_cdf(prob: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Index drawn from each row of non-negative ``prob`` (a positive sum) by its uniform draw
    ``u``: the first index whose cumulative sum exceeds ``u`` times the total (in float64; zero
    entries, padding included, are never drawn, nor is a point's draw moved by padding after it)."""
    cs = prob.to(torch.float64).cumsum(1)
    target = u.clamp_max(1.0 - 2.0**-30)[:, None] * cs[:, -1:]
    return torch.searchsorted(cs, target, right=True)[:, 0].clamp_max(prob.shape[1] - 1)


def batched_kmeans(X: torch.Tensor, mask: torch.Tensor | None, n_clusters: torch.Tensor, *,
                   n_init: int = 10, max_iter: int = 50, generator: torch.Generator | None = None):
    """Lloyd's k-means with k-means++ seeding on a padded batch, ``k`` per instance.

    Parameters
    ----------
    X : Tensor of shape (B, n, p)
    mask : bool Tensor of shape (B, n) or None
    n_clusters : int Tensor of shape (B,)
        ``1 <= k_b <= n_b``.
    n_init : int
        Restarts (run side by side); the one with the lowest inertia is kept.
    max_iter : int
        Lloyd iterations (stops early when no assignment changes).
    generator : torch.Generator or None
        Source of the seeding, one number drawn from it per call (``None``: the global RNG).
        Every instance of the batch reads the same uniform draws (one per restart and centre,
        from a CPU generator seeded with that number, the same on every device), so an
        instance's starts depend on the instance and the generator's state, not on the other
        instances of the batch nor on its padding (up to rounding in a GPU's cumulative sums).

    Returns
    -------
    labels : int64 Tensor of shape (B, n)
        Padded positions get -1.
    inertia : Tensor of shape (B,)
    """
    mask = as_mask(mask, X)
    B, n, p = X.shape
    dev, dt = X.device, X.dtype
    if mask is None:
        mask = torch.ones(B, n, dtype=torch.bool, device=dev)
    R = _count("n_init", n_init)
    _count("max_iter", max_iter)
    if not isinstance(n_clusters, torch.Tensor) or n_clusters.is_floating_point():
        raise TypeError(f"n_clusters must be an int tensor of shape (B,), got "
                        f"{type(n_clusters).__name__}")
    k = n_clusters.to(device=dev, dtype=torch.long)
    # one read of the device: the largest k, and whether any k is outside [1, n_b]
    bad, k_max = torch.stack([((k < 1) | (k > mask.sum(1))).any().long(), k.max()]).tolist()
    if bad:
        raise ValueError(f"n_clusters must lie in [1, n] for each instance (n its real elements), "
                         f"got {k.tolist()}")
    Xr = X.repeat_interleave(R, 0)  # (BR, n, p)
    Mr = mask.repeat_interleave(R, 0)
    kr = k.repeat_interleave(R, 0)
    BR = B * R
    valid_c = torch.arange(k_max, device=dev)[None, :] < kr[:, None]  # (BR, k_max)
    rows = torch.arange(BR, device=dev)
    inf = torch.tensor(float("inf"), device=dev, dtype=dt)

    def scores(C, Xs, valid):
        # ||c||^2 - 2 <x, c>: the squared distance up to ||x||^2, which does not change argmin;
        # centres j >= k_b get +inf. One fused baddbmm on (rows, n, k_max).
        cn = torch.where(valid, (C * C).sum(-1), inf)
        return torch.baddbmm(cn[:, None, :], Xs, C.transpose(1, 2), alpha=-2.0)

    # k-means++ seeding (one greedy candidate per step)
    w = Mr.to(dt)
    U = _seeding_draws(generator, R, k_max, B, dev)
    first = _inverse_cdf(w, U[0])
    C = torch.zeros(BR, k_max, p, device=dev, dtype=dt)
    C[:, 0] = Xr[rows, first]
    closest = ((Xr - C[:, :1]) ** 2).sum(-1)
    for j in range(1, k_max):
        prob = closest * w
        tot = prob.sum(1, keepdim=True)
        # all real points already on a centre: draw uniformly among real points
        prob = torch.where(tot > 0, prob, w)
        pick = _inverse_cdf(prob, U[j])
        C[:, j] = Xr[rows, pick]
        closest = torch.minimum(closest, ((Xr - C[:, j:j + 1]) ** 2).sum(-1))

    # Lloyd iterations on the runs whose assignment still changes (most converge in a few steps,
    # so the active set shrinks fast)
    Xw = Xr * w[:, :, None]
    labels = torch.full((BR, n), -1, device=dev, dtype=torch.long)
    act = rows
    for _ in range(int(max_iter)):
        Xa, Ma, Ca = Xr[act], Mr[act], C[act]
        new = torch.where(Ma, scores(Ca, Xa, valid_c[act]).argmin(-1), -1)
        changed = (new != labels[act]).any(1)
        labels[act] = new
        act, new = act[changed], new[changed]
        if act.numel() == 0:
            break
        lab0 = new.clamp_min(0)
        wa = w[act]
        counts = torch.zeros(len(act), k_max, device=dev, dtype=dt).scatter_add_(1, lab0, wa)
        sums = torch.zeros(len(act), k_max, p, device=dev, dtype=dt).scatter_add_(
            1, lab0[:, :, None].expand(-1, -1, p), Xw[act])
        # an emptied cluster keeps its previous centre
        C[act] = torch.where(counts[:, :, None] > 0, sums / counts.clamp_min(1)[:, :, None],
                             Ca[changed])
    smin, labels = scores(C, Xr, valid_c).min(-1)
    labels = torch.where(Mr, labels, -1)
    dmin = (smin + (Xr * Xr).sum(-1)).clamp_min(0.0)
    inertia = (dmin * w).sum(1).view(B, R)
    best = inertia.argmin(1)
    pick = torch.arange(B, device=dev) * R + best
    return labels[pick], inertia[torch.arange(B, device=dev), best]


def spectral_cluster(affinity: torch.Tensor, mask: torch.Tensor | None = None,
                     n_clusters: torch.Tensor | int | None = None, *,
                     max_clusters: int | None = None, n_init: int = 10, max_iter: int = 50,
                     generator: torch.Generator | None = None, min_clusters: int | None = None,
                     threshold: float | None = None):
    """Eigengap (when ``n_clusters`` is None) + spectral embedding + k-means, all batched.

    With ``threshold``, ``k`` is the count of eigenvalues below it (``threshold_n_clusters`` in
    this module) instead of the eigengap; ``min_clusters`` and
    ``max_clusters`` bound either rule.

    Returns
    -------
    labels : int64 Tensor of shape (B, n) (-1 on padding)
    n_clusters : int64 Tensor of shape (B,)
    eigenvalues : Tensor of shape (B, n)
    """
    mask = as_mask(mask, affinity)
    B, n, _ = affinity.shape
    if mask is None:
        mask = torch.ones(B, n, dtype=torch.bool, device=affinity.device)
    _count("n_init", n_init)
    _count("max_iter", max_iter)
    if n_clusters is not None:
        _count("n_clusters", n_clusters)
    lengths = mask.sum(1)
    w, V = laplacian_eigh(affinity, mask)
    if n_clusters is None and threshold is not None:
        k = threshold_n_clusters(w, lengths, threshold, max_clusters, min_clusters)
    elif n_clusters is None:
        k = eigengap_n_clusters(w, lengths, max_clusters, min_clusters)
    else:
        k = torch.minimum(torch.as_tensor(n_clusters, device=affinity.device,
                                          dtype=torch.long).expand(B), lengths)
    E = spectral_embedding(V, mask, k)
    labels, _ = batched_kmeans(E, mask, k, n_init=n_init, max_iter=max_iter, generator=generator)
    return labels, k, w
