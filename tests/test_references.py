"""Numerical checks against independent references: POT, SciPy, scikit-learn and plain numpy
loops written from the documented formulas, one unpadded set at a time, on tiny float64 problems.

Tolerances: float64 throughout; ``1e-10`` and tighter where both sides run the same closed-form
arithmetic in another order, looser only where an iterative solver (Sinkhorn) or a float32
network is on one side (stated at the assertion).
"""

import itertools
import warnings

import numpy as np
import ot as pot
import pytest
import scipy.linalg as sla
import torch
from scipy.spatial.distance import cdist
from sklearn.cluster import KMeans, SpectralClustering
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from skset import (
    ABCClusterer,
    DeepSetsRegressor,
    DilatedKernelFeatures,
    EigengapSpectralClustering,
    NystromFeatures,
    OTKEmbedding,
    OTKRegressor,
    SetTransformerClassifier,
)
from skset.nn import (
    ISAB,
    MAB,
    PMA,
    SAB,
    ABCKernel,
    DeepSets,
    SetTransformer,
    abc_affinity,
    abc_loss,
    batched_kmeans,
    eigengap_n_clusters,
    gaussian_kernel,
    inv_sqrt_psd,
    laplacian_eigh,
    normalized_laplacian,
    nystrom_map,
    spectral_embedding,
)
from skset.nn.dilated_kernels import KERNEL_TAPS
from skset.ot import sinkhorn, transport_similarity
from skset.utils import iter_transform

DT = torch.float64
INF = float("inf")


# ----------------------------------------------------------------------------- numpy references
def _np(t):
    return t.detach().numpy().astype(np.float64)


def _pad(sets, fill=float("nan")):
    """Sets packed into ``(B, n_max, d)`` float64 with ``fill`` in the padding, and the mask."""
    n_max = max(len(s) for s in sets)
    X = torch.full((len(sets), n_max, sets[0].shape[1]), fill, dtype=DT)
    M = torch.zeros(len(sets), n_max, dtype=torch.bool)
    for b, s in enumerate(sets):
        X[b, :len(s)] = torch.from_numpy(s)
        M[b, :len(s)] = True
    return X, M


def _linear(x, lin):
    out = x @ _np(lin.weight).T
    return out if lin.bias is None else out + _np(lin.bias)


def _norm(x, module):
    """The module's norm on one set ``x (n, D)``: identity, LayerNorm or SetNorm by the formula."""
    name = type(module).__name__
    if name == "_Identity":
        return x
    if name == "SetNorm":
        z = (x - x.mean()) / np.sqrt(x.var() + module.eps)
    else:  # LayerNorm: per element
        z = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + module.eps)
    return z * _np(module.weight) + _np(module.bias)


def _relu(x):
    return np.maximum(x, 0.0)


def _softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _mha(q, k, v, attn):
    """Multi-head attention of Vaswani et al. on one set, head by head."""
    Q, K, V = _linear(q, attn.q_proj), _linear(k, attn.k_proj), _linear(v, attn.v_proj)
    h = attn.head_dim
    heads = []
    for i in range(attn.n_heads):
        sl = slice(i * h, (i + 1) * h)
        heads.append(_softmax(Q[:, sl] @ K[:, sl].T / np.sqrt(h)) @ V[:, sl])
    return _linear(np.concatenate(heads, 1), attn.out_proj)


def _mab(x, y, mab):
    """``MAB(X, Y)`` as the module docstring writes it (post-norm or clean path)."""
    if mab.residual == "original":
        h = _norm(x + _mha(x, y, y, mab.attn), mab.norm0)
        return _norm(h + _relu(_linear(h, mab.ff)), mab.norm1)
    h = x + _mha(_norm(x, mab.norm_q), _norm(y, mab.norm_k), y, mab.attn)
    return h + _linear(_relu(_norm(h, mab.norm_ff)), mab.ff)


def _isab(x, blk):
    return _mab(x, _mab(_np(blk.inducing), x, blk.mab1), blk.mab2)


def _pma(x, pma):
    z = (_relu(_linear(x, pma.ff)) if pma.residual == "original"
         else _linear(_relu(_norm(x, pma.ff_norm)), pma.ff))
    return _mab(_np(pma.seeds), z, pma.mab)


def _mlp(z, seq):
    for layer in seq:
        z = _relu(z) if isinstance(layer, torch.nn.ReLU) else _linear(z, layer)
    return z


def _pooled_skip(x, skip):
    z = np.concatenate([x.mean(0), x.max(0)])
    return _linear((z - _np(skip.shift)) / _np(skip.scale), skip.linear)


def _randomise(module, seed):
    """Every parameter and buffer of ``module`` redrawn (norm scales near 1), so that no term of
    a formula hides behind an initial value of 0 or 1."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in list(module.named_parameters()) + list(module.named_buffers()):
            if not t.is_floating_point() or name.endswith(("pool_size", "mix", "sim_log_scale",
                                                           "sim_offset")):
                continue
            r = torch.randn(t.shape, generator=g, dtype=t.dtype)
            if name.endswith("scale"):  # PooledLinear's scale: positive
                t.copy_(0.5 + r.abs())
            elif "norm" in name and name.endswith("weight"):
                t.copy_(1.0 + 0.3 * r)
            else:
                t.copy_(0.5 * r)
    return module


def _gauss(x, w, bandwidth):
    return np.exp(-cdist(x, w, "sqeuclidean") / (2 * bandwidth**2))


def _inv_sqrt_floor(K, floor):
    """``K^{-1/2}`` by scipy's ``eigh``, eigenvalues below ``floor * max`` raised to it."""
    ev, U = sla.eigh(K)
    lam = np.maximum(ev, floor * ev.max())
    return (U / np.sqrt(lam)) @ U.T, int((ev < floor * ev.max()).sum())


# ----------------------------------------------------------------------------- Nystrom
def _level_shape_kmers(s, window, dilation):
    """Dilated k-mers of one set by a loop (a set shorter than the span: one k-mer, its last
    element repeated), each coded as its deviations from its mean over the steps, then the mean."""
    n = len(s)
    out = []
    for i in range(max(n - (window - 1) * dilation, 1)):
        steps = np.stack([s[min(i + j * dilation, n - 1)] for j in range(window)])
        level = steps.mean(0)
        out.append(np.concatenate([(steps - level).ravel(), level]))
    return np.array(out)


def test_nystrom_dilated_level_shape_map_matches_a_loop_and_scipy():
    """NystromFeatures on dilated level+shape k-mers equals a numpy loop with scipy's floored K^-1/2."""
    rng = np.random.default_rng(0)
    sets = [rng.normal(size=(n, 2)) for n in (9, 12, 4, 15, 7)]  # 4 < span 5: one k-mer
    floor = 0.02
    nf = NystromFeatures(n_components=8, window=3, dilation=2, kmer_coding="level_shape",
                         standardize=True, normalize=True, keep_norm=True, bandwidth=1.5,
                         eigenvalue_floor=floor, dtype="float64", random_state=0).fit(sets)
    kmers = [_level_shape_kmers(s, 3, 2) for s in sets]
    pooled = np.concatenate(kmers)
    # standardisation of the coded k-mers: their mean and (population) standard deviation
    np.testing.assert_allclose(nf.mean_, pooled.mean(0), rtol=0, atol=1e-14)
    np.testing.assert_allclose(nf.scale_, pooled.std(0), rtol=1e-13, atol=0)
    W = nf.anchors_
    np.testing.assert_allclose(np.linalg.norm(W, axis=1), 1.0, atol=1e-12)  # unit anchors
    R, n_floored = _inv_sqrt_floor(_gauss(W, W, 1.5), floor)
    assert n_floored > 0  # the floor is exercised
    np.testing.assert_allclose(nf.normalization_, R, rtol=1e-9, atol=1e-9)
    for out, k in zip(nf.transform(sets), kmers, strict=True):
        z = (k - nf.mean_) / nf.scale_
        norms = np.linalg.norm(z, axis=1, keepdims=True)
        ref = _gauss(z / norms, W, 1.5) @ R * norms
        # the K^{-1/2} entries reach ~1e2 here: 1e-9 relative to them
        np.testing.assert_allclose(out, ref, rtol=1e-9, atol=1e-9)


def test_nystrom_weighted_standardisation_and_random_anchors():
    """Weighted mean_ and scale_ are numpy's weighted moments; random anchors are standardised rows."""
    rng = np.random.default_rng(1)
    sets = [rng.normal(size=(n, 3)) * [1.0, 2.0, 0.5] + [0.0, 1.0, -1.0] for n in (6, 9, 4, 7)]
    ew = [rng.uniform(0.1, 2.0, len(s)) for s in sets]
    ew[1][2] = 0.0  # a removed element
    sw = np.array([1.0, 2.0, 0.5, 3.0])
    nf = NystromFeatures(n_components=5, window=1, standardize=True, normalize=False,
                         bandwidth=0.5, anchors="random", dtype="float64",
                         random_state=0).fit(sets, sample_weight=sw, element_weight=ew)
    X = np.concatenate(sets)
    # documented: each set keeps weight n_i^+ (elements of positive mass) * sample_weight,
    # shared among its elements in proportion to element_weight
    w = np.concatenate([sw[i] * (e > 0).sum() * e / e.sum() for i, e in enumerate(ew)])
    mean = np.average(X, axis=0, weights=w)
    std = np.sqrt(np.average((X - mean) ** 2, axis=0, weights=w))
    np.testing.assert_allclose(nf.mean_, mean, rtol=0, atol=1e-14)
    np.testing.assert_allclose(nf.scale_, std, rtol=1e-13, atol=0)
    Z = (X[w > 0] - nf.mean_) / nf.scale_
    assert cdist(nf.anchors_, Z).min(1).max() < 1e-12


def test_engine_nystrom_map_matches_scipy():
    """gaussian_kernel, inv_sqrt_psd (floor active) and nystrom_map match scipy's cdist and eigh."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 5, 3))
    w = rng.normal(size=(6, 3))
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    bw = 1.3
    K = gaussian_kernel(torch.from_numpy(x), torch.from_numpy(w), bw).numpy()
    np.testing.assert_allclose(K, _gauss(x.reshape(-1, 3), w, bw).reshape(2, 5, 6),
                               rtol=1e-12, atol=1e-14)
    G = _gauss(w, w, bw)
    R, n_floored = _inv_sqrt_floor(G, 0.05)
    assert n_floored > 0
    np.testing.assert_allclose(inv_sqrt_psd(torch.from_numpy(G), 0.05).numpy(), R,
                               rtol=1e-10, atol=1e-10)
    psi = nystrom_map(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(R), bw,
                      normalize=True, keep_norm=True).numpy()
    for b in range(2):
        norms = np.linalg.norm(x[b], axis=1, keepdims=True)
        np.testing.assert_allclose(psi[b], _gauss(x[b] / norms, w, bw) @ R * norms,
                                   rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- OTK
def _pot_otk(s, mass, refs, eps, sigma, mode, reg_m):
    """The raw OTK embedding of one set from POT's plans: positions ``S`` with ``n`` the set's
    length (elements of mass 0 included), the cost of ``mode``, the elements of positive mass
    given to POT, then ``sqrt(p / q) (P o S)^T x`` per reference; also the plans."""
    q, p, _ = refs.shape
    n = len(s)
    d2 = (np.arange(n)[:, None] / n - np.arange(p)[None] / p) ** 2 / sigma**2
    S = np.exp(-d2)
    # kernel mode: log S less its row maximum (documented; it cancels in the balanced plan)
    log_s = -d2 + d2.min(1, keepdims=True)
    pos = mass > 0
    a = mass[pos] / mass.sum()
    b = np.full(p, 1 / p)
    out, plans = [], []
    for z in refs:
        K = s @ z.T
        M = {"plan": -K, "kernel": -(K + eps * log_s), "similarity": -(K * S)}[mode][pos]
        if reg_m is None:
            P_pos = pot.sinkhorn(a, b, M, eps, method="sinkhorn_log", numItermax=100_000,
                                 stopThr=1e-15)
        else:
            P_pos = pot.unbalanced.sinkhorn_unbalanced(a, b, M, eps, (reg_m, INF),
                                                       numItermax=100_000, stopThr=1e-15)
        P = np.zeros((n, p))
        P[pos] = P_pos
        plans.append(P * S)
        out.append(np.sqrt(p / q) * (P * S).T @ s)
    return np.concatenate(out).ravel(), np.stack(plans)


@pytest.mark.parametrize(("mode", "reg_m"), [("kernel", None), ("similarity", None),
                                             ("plan", 0.5), ("kernel", 0.5)])
def test_otk_embedding_with_references_positions_and_masses_matches_pot(mode, reg_m):
    """OTKEmbedding with 2 references, positions, masses, centring and norm matches POT set by set."""
    rng = np.random.default_rng(3)
    sets = [rng.normal(size=(int(n), 3)) for n in rng.integers(2, 9, 8)]
    ew = [rng.uniform(0.2, 2.0, len(s)) for s in sets]
    ew[2][1] = 0.0
    sw = rng.uniform(0.5, 2.0, len(sets))
    eps, sigma = 0.4, 0.4
    est = OTKEmbedding(n_supports=3, n_references=2, epsilon=eps, position_sigma=sigma,
                       position_mode=mode, reg_m=reg_m, sinkhorn_iter=3000, sinkhorn_tol=None,
                       dtype="float64", random_state=0).fit(sets, sample_weight=sw,
                                                             element_weight=ew)
    assert est.input_offset_ is None  # features near zero: no shift enters
    emb = est.transform(sets, element_weight=ew)
    plans = est.transport_plan(sets, element_weight=ew)
    raw, ref_plans = zip(*[_pot_otk(s, m, est.references_, eps, sigma, mode, reg_m)
                           for s, m in zip(sets, ew, strict=True)])
    raw = np.stack(raw)
    mean = np.average(raw, axis=0, weights=sw)  # sample-weighted mean training embedding
    centred = raw - mean
    ref = centred * np.sqrt(raw.shape[1]) / np.linalg.norm(centred, axis=1, keepdims=True)
    # 3000 Sinkhorn iterations against POT run to 1e-15: converged to float64 rounding
    np.testing.assert_allclose(est.mean_, mean, rtol=0, atol=1e-12)
    np.testing.assert_allclose(emb, ref, rtol=0, atol=1e-11)
    for P, R in zip(plans, ref_plans, strict=True):
        np.testing.assert_allclose(P, R, rtol=0, atol=1e-12)


def test_iter_transform_of_a_generator_streams_pots_embeddings():
    """iter_transform over a generator yields chunks of chunk_size rows, each POT's sqrt(p) P^T x."""
    rng = np.random.default_rng(20)
    train = [rng.normal(size=(int(n), 2)) for n in rng.integers(2, 9, 10)]
    est = OTKEmbedding(n_supports=3, epsilon=0.5, position_sigma=None, center=False,
                       normalize=False, sinkhorn_iter=2000, sinkhorn_tol=None, dtype="float64",
                       random_state=0).fit(train)
    stream = [rng.normal(size=(int(n), 2)) for n in rng.integers(1, 9, 11)]
    chunks = list(iter_transform(est, (s for s in stream), chunk_size=4))
    assert [c.shape for c in chunks] == [(4, 6), (4, 6), (3, 6)]
    for row, s in zip(np.concatenate(chunks), stream, strict=True):
        ref, _ = _pot_otk(s, np.ones(len(s)), est.references_, 0.5, INF, "plan", None)
        np.testing.assert_allclose(row, ref, rtol=0, atol=1e-12)


def test_transport_similarity_is_minus_pots_linear_cost():
    """transport_similarity(P, K) equals minus POT's sinkhorn2 linear cost of the same problem."""
    rng = np.random.default_rng(4)
    lengths = (6, 3, 5)
    sim = torch.from_numpy(rng.normal(size=(3, 6, 4)))
    mask = torch.arange(6)[None] < torch.tensor(lengths)[:, None]
    w = torch.from_numpy(rng.uniform(0.2, 2.0, size=(3, 6)))
    P = sinkhorn(sim, mask, epsilon=0.3, n_iter=3000, method="log", weights=w)
    got = transport_similarity(P, sim).numpy()
    for b, n in enumerate(lengths):
        a = w[b, :n].numpy() / w[b, :n].numpy().sum()
        cost = pot.sinkhorn2(a, np.full(4, 0.25), -sim[b, :n].numpy(), 0.3,
                             method="sinkhorn_log", numItermax=100_000, stopThr=1e-15)
        np.testing.assert_allclose(got[b], -float(cost), rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- dilated kernels
def _minirocket_responses(x, dilation):
    """``(84, n)``: ``3 * sum of the three taps of weight 2 - sum of all nine`` at every point,
    taps ``x[t + (j - 4) d]`` and zero beyond the series; kernels in combinations order."""
    n = len(x)
    taps = np.zeros((9, n))
    for j in range(9):
        for t in range(n):
            u = t + (j - 4) * dilation
            if 0 <= u < n:
                taps[j, t] = x[u]
    return np.stack([3 * taps[list(c)].sum(0) - taps.sum(0)
                     for c in itertools.combinations(range(9), 3)])


def test_dilated_kernel_thresholds_and_ppv_match_a_loop_and_numpys_quantiles():
    """Thresholds are numpy quantiles of one series' responses; transform is a PPV loop over them."""
    assert list(KERNEL_TAPS) == list(itertools.combinations(range(9), 3))
    rng = np.random.default_rng(21)
    train = np.cumsum(rng.normal(size=(60, 1)), 0)
    q = 5
    est = DilatedKernelFeatures(n_thresholds=q, max_dilations=3, dtype="float64",
                                random_state=0).fit([train])
    levels = (np.arange(1, q + 1) * (np.sqrt(5) - 1) / 2) % 1.0
    for i, d in enumerate(est.dilations_):
        r = _minirocket_responses(train[:, 0], d)
        np.testing.assert_allclose(est.thresholds_[i], np.quantile(r, levels, axis=1).T,
                                   rtol=0, atol=1e-12)
    new = [rng.normal(size=(n, 1)) for n in (30, 7)]
    ref = np.stack([np.concatenate([(_minirocket_responses(x[:, 0], d)[:, :, None]
                                     > est.thresholds_[i][:, None, :]).mean(1).ravel()
                                    for i, d in enumerate(est.dilations_)]) for x in new])
    np.testing.assert_array_equal(est.transform(new), ref)


# ----------------------------------------------------------------------------- spectral
def _reference_laplacian(A):
    """``I - D^{-1/2} A D^{-1/2}``, degrees with the diagonal, an isolated node a zero row."""
    d = A.sum(1)
    dis = np.where(d > 0, 1 / np.sqrt(np.where(d > 0, d, 1.0)), 0.0)
    return np.diag((d > 0).astype(float)) - dis[:, None] * A * dis[None, :]


def _sym(rng, n):
    A = rng.uniform(size=(n, n))
    return (A + A.T) / 2


def test_normalized_laplacian_matches_numpy_with_an_isolated_node_and_padding():
    """normalized_laplacian and its eigenvalues match numpy and scipy with an isolated node and padding."""
    rng = np.random.default_rng(5)
    A = _sym(rng, 7)
    A[4] = 0.0
    A[:, 4] = 0.0  # no edge, no self-loop: a zero row, eigenvalue 0
    big = np.full((2, 10, 10), np.nan)  # the padding may hold anything
    big[0, :7, :7] = A
    big[1] = _sym(rng, 10)
    mask = torch.zeros(2, 10, dtype=torch.bool)
    mask[0, :7] = mask[1] = True
    L = normalized_laplacian(torch.from_numpy(big), mask).numpy()
    for b, n in ((0, 7), (1, 10)):
        ref = _reference_laplacian(big[b, :n, :n])
        np.testing.assert_allclose(L[b, :n, :n], ref, rtol=0, atol=1e-15)
        w = laplacian_eigh(torch.from_numpy(big), mask, eigenvectors=False)[b, :n].numpy()
        np.testing.assert_allclose(w, np.clip(sla.eigvalsh(ref), 0, 2), rtol=0, atol=1e-13)
    # padded nodes: no edges, the documented sentinel 3 + j / n_max on the diagonal
    assert not L[0, 7:, :7].any() and not L[0, :7, 7:].any()
    np.testing.assert_allclose(np.diag(L[0])[7:], 3 + np.arange(7, 10) / 10, rtol=0, atol=0)


def test_laplacian_eigenvectors_and_spectral_embedding_match_scipy():
    """laplacian_eigh eigenvectors (up to sign) and spectral_embedding rows match scipy.linalg.eigh."""
    rng = np.random.default_rng(6)
    mats = [_sym(rng, 8), _sym(rng, 5)]
    big = np.zeros((2, 8, 8))
    big[0] = mats[0]
    big[1, :5, :5] = mats[1]
    mask = torch.arange(8)[None] < torch.tensor([[8], [5]])
    w, V = laplacian_eigh(torch.from_numpy(big), mask)
    ks = torch.tensor([3, 2])
    E = spectral_embedding(V, mask, ks).numpy()
    for b, A in enumerate(mats):
        n, k = len(A), int(ks[b])
        ev, U = sla.eigh(_reference_laplacian(A))
        assert np.diff(ev).min() > 1e-6  # distinct: each eigenvector is defined up to sign
        Vb = V[b, :n, :n].numpy()
        signs = np.sign((Vb * U).sum(0))
        np.testing.assert_allclose(Vb, U * signs, rtol=0, atol=1e-10)
        np.testing.assert_allclose(w[b, :n].numpy(), np.clip(ev, 0, 2), rtol=0, atol=1e-13)
        Uk = U[:, :k] * signs[:k]
        np.testing.assert_allclose(E[b, :n, :k], Uk / np.linalg.norm(Uk, axis=1, keepdims=True),
                                   rtol=0, atol=1e-9)
        assert not E[b, :, k:].any() and not E[b, n:].any()


def _reference_k(lam, max_clusters, min_clusters, tol=1e-8):
    """The documented eigengap rule on ascending eigenvalues, with lambda_{n+1} = 1 and
    ``k`` restricted to ``[min_clusters, min(max_clusters, n)]`` (ties: the smallest k)."""
    n = len(lam)
    lam = np.append(lam, 1.0)
    K = min(max_clusters, n)
    lo = min(min_clusters, K)
    c = max(int((lam[:n] <= tol).sum()), 1)
    if c >= K:
        return K
    cand = np.arange(max(c, lo), K + 1)
    gaps = lam[cand] - lam[cand - 1]
    return int(cand[np.flatnonzero(gaps >= gaps.max() - tol)[0]])


def test_eigengap_n_clusters_with_bounds_matches_a_loop_over_scipy_eigenvalues():
    """eigengap_n_clusters with max and min bounds equals the documented rule on scipy eigenvalues."""
    rng = np.random.default_rng(7)
    mats = []
    for _ in range(12):
        sizes = rng.integers(1, 6, size=int(rng.integers(1, 5)))
        A = sla.block_diag(*[np.full((s, s), 0.9) for s in sizes]) + 0.05
        A = A + rng.uniform(0, 0.15, A.shape)
        mats.append((A + A.T) / 2)
    n_max = max(len(A) for A in mats)
    big = np.zeros((len(mats), n_max, n_max))
    lengths = torch.tensor([len(A) for A in mats])
    for b, A in enumerate(mats):
        big[b, :len(A), :len(A)] = A
    mask = torch.arange(n_max)[None] < lengths[:, None]
    w = laplacian_eigh(torch.from_numpy(big), mask, eigenvectors=False)
    max_k = torch.from_numpy(rng.integers(2, 7, len(mats)))
    for min_k in (None, 2):
        got = eigengap_n_clusters(w, lengths, max_k, min_k).tolist()
        ref = [_reference_k(np.clip(sla.eigvalsh(_reference_laplacian(A)), 0, 2), int(m),
                            min_k or 1) for A, m in zip(mats, max_k, strict=True)]
        assert got == ref


def test_batched_kmeans_reaches_sklearn_inertia_at_a_lloyd_fixed_point():
    """batched_kmeans labels are a Lloyd fixed point with scikit-learn KMeans' optimal inertia."""
    ks = [3, 2, 4]
    inst = [make_blobs(n, centers=k, cluster_std=0.6, center_box=(-6, 6), random_state=b)[0]
            for b, (n, k) in enumerate(zip((20, 13, 30), ks, strict=True))]
    X, M = _pad(inst, fill=1e3)
    labels, inertia = batched_kmeans(X, M, torch.tensor(ks), n_init=10,
                                     generator=torch.Generator().manual_seed(0))
    for b, (s, k) in enumerate(zip(inst, ks, strict=True)):
        lab = labels[b, :len(s)].numpy()
        assert (labels[b, len(s):] == -1).all()
        C = np.stack([s[lab == j].mean(0) for j in range(k)])
        d2 = cdist(s, C, "sqeuclidean")
        np.testing.assert_array_equal(d2.argmin(1), lab)
        np.testing.assert_allclose(float(inertia[b]), d2.min(1).sum(), rtol=1e-12)
        sk = KMeans(k, n_init=50, random_state=0).fit(s)
        np.testing.assert_allclose(float(inertia[b]), sk.inertia_, rtol=1e-12)
        assert adjusted_rand_score(sk.labels_, lab) == 1.0


def test_eigengap_spectral_clustering_knn_affinity_is_sklearns():
    """affinity='nearest_neighbors' is SpectralClustering's symmetrised kNN connectivity matrix."""
    X, _ = make_blobs(40, centers=3, cluster_std=0.5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a graph that may not be fully connected
        ours = EigengapSpectralClustering(affinity="nearest_neighbors", n_neighbors=6,
                                          random_state=0).fit(X).affinity_matrix_
        ref = SpectralClustering(3, affinity="nearest_neighbors", n_neighbors=6,
                                 random_state=0).fit(X).affinity_matrix_
    np.testing.assert_array_equal(ours, ref.toarray())


# ----------------------------------------------------------------------------- attention
CONFIGS = [("original", "layer"), ("clean", "set"), ("original", "set"), ("clean", None)]


@pytest.mark.parametrize(("residual", "norm"), CONFIGS)
def test_attention_blocks_match_numpy(residual, norm):
    """MAB, SAB, ISAB and PMA on a padded batch equal a numpy per-set loop with the module's weights."""
    rng = np.random.default_rng(9)
    D, H = 8, 2
    sets = [rng.normal(size=(n, D)) for n in (5, 2, 7)]
    others = [rng.normal(size=(n, D)) for n in (3, 6, 1)]
    X, M = _pad(sets)
    Y, MY = _pad(others)
    kw = dict(norm=norm, residual=residual)
    mab = _randomise(MAB(D, H, **kw).double(), 1)
    sab = _randomise(SAB(D, H, **kw).double(), 2)
    isab = _randomise(ISAB(D, H, 3, **kw).double(), 3)
    pma = _randomise(PMA(D, H, 2, **kw).double(), 4)
    with torch.no_grad():
        out = {"mab": mab(X, Y, M, MY), "sab": sab(X, M), "isab": isab(X, M), "pma": pma(X, M)}
    for b, (s, o) in enumerate(zip(sets, others, strict=True)):
        n = len(s)
        ref = {"mab": _mab(s, o, mab), "sab": _mab(s, s, sab.mab), "isab": _isab(s, isab),
               "pma": _pma(s, pma)}
        for name, r in ref.items():
            got = _np(out[name][b, :n] if name != "pma" else out[name][b])
            np.testing.assert_allclose(got, r, rtol=1e-10, atol=1e-10, err_msg=name)


def test_set_transformer_plus_plus_forward_matches_numpy():
    """SetTransformer++ with a SAB decoder and pooled skip equals a numpy per-set forward pass."""
    rng = np.random.default_rng(10)
    sets = [rng.normal(size=(n, 3)) for n in (6, 1, 4)]
    net = _randomise(SetTransformer(3, 8, 2, n_layers=2, n_heads=2, n_inducing=3, n_seeds=2,
                                    norm="set", residual="clean", decoder="sab",
                                    n_decoder_layers=1, pooled_skip=True).double(), 11)
    X, M = _pad(sets)
    with torch.no_grad():
        out = _np(net(X, M))
    for b, s in enumerate(sets):
        h = _linear(s, net.input)
        for blk in net.blocks:
            h = _isab(h, blk)
        z = _pma(h, net.pool)
        z = _mab(z, z, net.pool_sab.mab).ravel()
        ref = _mlp(z, net.decoder) + _pooled_skip(s, net.skip)
        np.testing.assert_allclose(out[b], ref, rtol=1e-10, atol=1e-10)


def _np_deep_sets(s, net):
    enc = net.encoder
    h = _linear(s, enc.input)
    for blk in enc.blocks:
        if blk.residual is None:
            h = _linear(_relu(h), blk.lin)
        else:
            f = _norm(_linear(_relu(_norm(_linear(h, blk.lin1), blk.norm1)), blk.lin2), blk.norm2)
            h = h + f if blk.residual == "clean" else _relu(h + f)
    if enc.residual == "clean":
        h = _linear(_relu(_norm(h, enc.final_norm)), enc.final)
    n = len(s)
    size = float(getattr(net, "pool_size", 1.0))
    pooled = {"sum": h.sum(0), "mean": h.mean(0), "max": h.max(0),
              "sized_mean": h.sum(0) * size / n}[net.pooling]
    if net.pooling == "sized_mean":
        first = _linear(pooled, net.decoder[0]) + np.log(n / size) * _np(net.size_weight)
        out = _mlp(first, net.decoder[1:])
    else:
        out = _mlp(pooled, net.decoder)
    return out + (_pooled_skip(s, net.skip) if net.skip is not None else 0.0)


@pytest.mark.parametrize(("residual", "norm", "pooling"),
                         [(None, None, "sum"), ("original", "layer", "max"),
                          ("clean", "set", "sized_mean"), ("clean", "layer", "mean")])
def test_deep_sets_forward_matches_numpy(residual, norm, pooling):
    """DeepSets blocks, poolings and pooled skip on a padded batch equal a numpy per-set forward pass."""
    rng = np.random.default_rng(12)
    sets = [rng.normal(size=(n, 3)) for n in (6, 1, 4)]
    net = _randomise(DeepSets(3, 8, 2, n_layers=2, norm=norm, residual=residual,
                              pooling=pooling, pool_size=3.0, pooled_skip=True).double(), 13)
    X, M = _pad(sets)
    with torch.no_grad():
        out = _np(net(X, M))
    for b, s in enumerate(sets):
        np.testing.assert_allclose(out[b], _np_deep_sets(s, net), rtol=1e-10, atol=1e-10)


# ----------------------------------------------------------------------------- ABC
def _np_abc_logits(x, net):
    """The ABC compatibility ``c(z_i, z_j) + b`` of one instance (no prior), from the docstring."""
    z = np.tanh(_linear(x, net.embed))
    for blk in net.blocks:
        z = _mab(z, z, blk.mab)
    q, k = _linear(z, net.query), _linear(z, net.key)
    if net.compatibility == "multiplicative":
        c = q @ k.T / np.sqrt(net.compat_dim)
    else:
        c = _linear(np.tanh(q[:, None, :] + k[None, :, :]), net.v)[..., 0]
    return c + float(_np(net.bias))


def _sigmoid(c):
    return 1 / (1 + np.exp(-c))


@pytest.mark.parametrize("compatibility", ["multiplicative", "additive"])
def test_abc_kernel_logits_and_affinity_match_numpy(compatibility):
    """ABCKernel logits and abc_affinity equal the documented compatibility and sigmoid mean in numpy."""
    rng = np.random.default_rng(14)
    sets = [rng.normal(size=(n, 3)) for n in (6, 3)]
    net = _randomise(ABCKernel(3, dim=8, n_layers=2, n_heads=2, compatibility=compatibility,
                               compat_dim=4).double(), 15)
    X, M = _pad(sets)
    with torch.no_grad():
        C = net(X, M)
        A = abc_affinity(C, M).numpy()
    for b, s in enumerate(sets):
        n = len(s)
        ref = _np_abc_logits(s, net)
        np.testing.assert_allclose(_np(C[b, :n, :n]), ref, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(A[b, :n, :n], (_sigmoid(ref) + _sigmoid(ref.T)) / 2,
                                   rtol=1e-10, atol=1e-12)
        assert not A[b, n:].any() and not A[b, :, n:].any()


def test_abc_loss_class_weights_match_a_loop():
    """abc_loss with 'balanced' and (w_neg, w_pos) weights equals a numpy weighted BCE over real pairs."""
    rng = np.random.default_rng(16)
    C = torch.from_numpy(rng.normal(size=(2, 6, 6)))
    labels = torch.tensor([[0, 0, 1, 1, 1, 2], [3, 1, 3, 1, 9, 9]])
    mask = torch.arange(6)[None] < torch.tensor([[6], [4]])
    for cw in ("balanced", (0.3, 2.0)):
        losses = []
        for b, n in enumerate((6, 4)):
            c = C[b, :n, :n].numpy()
            kappa = (_sigmoid(c) + _sigmoid(c.T)) / 2
            lab = labels[b, :n].numpy()
            T = lab[:, None] == lab[None, :]
            n_pairs, n_pos = n * n, T.sum()
            w_neg, w_pos = ((n_pairs / (2 * (n_pairs - n_pos)), n_pairs / (2 * n_pos))
                            if cw == "balanced" else cw)
            bce = np.where(T, -w_pos * np.log(kappa), -w_neg * np.log(1 - kappa))
            losses.append(bce.sum() / n_pairs)
        got = float(abc_loss(C, labels, mask, class_weight=cw))
        np.testing.assert_allclose(got, np.mean(losses), rtol=1e-12, err_msg=str(cw))


def test_abc_clusterer_standardisation_and_affinity_match_numpy():
    """ABCClusterer mean_, its one RMS scale_ and affinity() equal numpy on the fitted network."""
    rng = np.random.RandomState(0)
    X, y = [], []
    for _ in range(12):
        xi, yi = make_blobs(int(rng.randint(6, 12)), centers=2, cluster_std=0.3, random_state=rng)
        X.append(xi * [1.0, 3.0] + [5.0, -2.0])
        y.append(yi)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = ABCClusterer(hidden_size=8, n_layers=1, n_heads=2, input_similarity=None,
                           max_steps=2, batch_size=4, eval_every=1, early_stopping=False,
                           random_state=0).fit(X, y)
    E = np.concatenate(X)
    np.testing.assert_allclose(est.mean_, E.mean(0), rtol=1e-12)
    np.testing.assert_allclose(est.scale_, np.full(2, np.sqrt(E.var(0).mean())), rtol=1e-12)
    test = X[:3]
    for x, A in zip(test, est.affinity(test), strict=True):
        c = _np_abc_logits((x - est.mean_) / est.scale_, est.module_)
        # the network runs in float32: agreement to float32 rounding of O(1) activations
        np.testing.assert_allclose(A, (_sigmoid(c) + _sigmoid(c.T)) / 2, rtol=0, atol=2e-6)


# ----------------------------------------------------------------------------- fitted networks
def _fit_quietly(est, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # two epochs: convergence warnings
        return est.fit(*args, **kwargs)


def _regression_sets(seed, n_sets):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(int(n), 3)) * [1.0, 2.0, 3.0] + [1.0, 0.0, -1.0]
         for n in rng.integers(2, 9, n_sets)]
    return X, rng


def test_deep_sets_regressor_predict_matches_numpy():
    """DeepSetsRegressor weighted standardisations, pool_size_ and predict equal a numpy forward pass."""
    X, rng = _regression_sets(17, 12)
    y = np.stack([[s.sum(), s[:, 0].max()] for s in X]) * 3 + 5
    sw = rng.uniform(0.5, 2.0, len(X))
    est = _fit_quietly(DeepSetsRegressor(hidden_size=8, max_iter=2, early_stopping=False,
                                         window=1, dtype="float64", random_state=0),
                       X, y, sample_weight=sw)
    E = np.concatenate(X)
    # each element weighs its set's sample_weight (NystromFeatures' documented rule; the set
    # networks' docstring names no rule)
    we = np.concatenate([np.full(len(s), w) for s, w in zip(X, sw, strict=True)])
    mean = np.average(E, axis=0, weights=we)
    np.testing.assert_allclose(est.mean_, mean, rtol=0, atol=1e-14)
    np.testing.assert_allclose(est.scale_, np.sqrt(np.average((E - mean) ** 2, axis=0, weights=we)),
                               rtol=1e-13)
    y_mean = np.average(y, axis=0, weights=sw)
    np.testing.assert_allclose(est.y_mean_, y_mean, rtol=1e-13)
    np.testing.assert_allclose(est.y_scale_, np.sqrt(np.average((y - y_mean) ** 2, axis=0,
                                                                weights=sw)), rtol=1e-13)
    np.testing.assert_allclose(est.pool_size_, np.average([len(s) for s in X], weights=sw),
                               rtol=1e-13)
    assert est.output_shrinkage_ == 1.0  # no validation split: no shrinkage
    ref = np.stack([_np_deep_sets((s - est.mean_) / est.scale_, est.module_) for s in X])
    np.testing.assert_allclose(est.predict(X), ref * est.y_scale_ + est.y_mean_,
                               rtol=1e-10, atol=1e-10)


def test_set_transformer_classifier_predict_proba_matches_numpy():
    """SetTransformerClassifier predict_proba is the softmax of a numpy forward pass."""
    X, _ = _regression_sets(18, 15)
    y = np.array(["a", "b", "c"] * 5)
    est = _fit_quietly(SetTransformerClassifier(hidden_size=8, n_heads=2, n_inducing=3,
                                                max_iter=2, early_stopping=False, window=1,
                                                dtype="float64", random_state=0), X, y)
    E = np.concatenate(X)
    np.testing.assert_allclose(est.mean_, E.mean(0), rtol=0, atol=1e-14)
    np.testing.assert_allclose(est.scale_, E.std(0), rtol=1e-13)
    net = est.module_
    logits = []
    for s in X:
        h = _linear((s - est.mean_) / est.scale_, net.input)
        for blk in net.blocks:
            h = _isab(h, blk)
        logits.append(_mlp(_pma(h, net.pool).ravel(), net.decoder))
    proba = _softmax(np.stack(logits))
    np.testing.assert_allclose(est.predict_proba(X), proba, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(est.predict(X), est.classes_[proba.argmax(1)])


def test_otk_regressor_predict_matches_numpy_and_pot():
    """OTKRegressor.predict equals numpy Nystrom, POT plans, centring, sqrt(D) norm and the head."""
    X, _ = _regression_sets(19, 14)
    y = np.array([s.sum() for s in X]) * 3 + 5
    eps, sigma = 0.5, 0.4
    est = _fit_quietly(OTKRegressor(n_components=6, window=1, standardize=True, normalize=True,
                                    keep_norm=True, bandwidth=0.7, n_supports=3, n_references=2,
                                    epsilon=eps, sinkhorn_iter=500, position_sigma=sigma,
                                    position_mode="plan", max_iter=2, dtype="float64",
                                    random_state=0), X, y)
    net = est.module_
    em = net.element_map
    E = np.concatenate(X)
    np.testing.assert_allclose(_np(em.mean), E.mean(0), rtol=0, atol=1e-14)
    np.testing.assert_allclose(_np(em.scale), E.std(0), rtol=1e-13)
    W = _np(em.anchors)
    W /= np.linalg.norm(W, axis=1, keepdims=True)  # the layer reads its anchors projected
    R, _ = _inv_sqrt_floor(_gauss(W, W, em.bandwidth), em.eigenvalue_floor)
    refs = _np(net.otk.references)
    q, p, _ = refs.shape
    preds = []
    for s in X:
        z = (s - _np(em.mean)) / _np(em.scale)
        norms = np.linalg.norm(z, axis=1, keepdims=True)
        f = _gauss(z / norms, W, em.bandwidth) @ R * norms
        raw, _ = _pot_otk(f, np.ones(len(f)), refs, eps, sigma, "plan", None)
        c = raw - _np(net.center)
        e = c * np.sqrt(c.size) / np.linalg.norm(c)
        preds.append(_linear(e, net.head)[0] * est.y_scale_[0] + est.y_mean_[0])
    # 500 Sinkhorn iterations at epsilon 0.5 against POT converged: float64 rounding, on
    # targets of size ~20
    np.testing.assert_allclose(est.predict(X), preds, rtol=0, atol=1e-9)
