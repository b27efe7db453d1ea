"""The trainable layers skset.nn.NystromLayer and skset.nn.OTKLayer."""

import numpy as np
import pytest
import torch

from skset import NystromFeatures, OTKEmbedding
from skset._sets import pack
from skset.nn import NystromLayer, OTKLayer, gaussian_kernel, inv_sqrt_psd, otk_embed


def _sets(rng, lengths, d=3):
    return [rng.normal(size=(n, d)) for n in lengths]


def _garbage_pack(sets, dtype=torch.float64, extra=3):
    """Pack with NaN-free garbage (large values) in the padding, plus ``extra`` padded columns."""
    X, M = pack(sets, dtype=dtype, n_max=max(s.shape[0] for s in sets) + extra)
    X = torch.where(M.unsqueeze(-1), X, torch.full_like(X, 1e3))
    return X, M


# -- inverse square root --
@pytest.mark.parametrize("floor", [1e-4, 1e-2])
def test_inv_sqrt_psd_gradcheck_with_floor_active(floor):
    g = torch.Generator().manual_seed(0)
    w = torch.nn.functional.normalize(torch.randn(9, 3, generator=g, dtype=torch.float64), dim=1)
    K = gaussian_kernel(w, w, 2.0)
    evals = torch.linalg.eigvalsh(K)
    assert (evals < floor * evals.max()).any()  # the floor is exercised
    w.requires_grad_()
    assert torch.autograd.gradcheck(lambda a: inv_sqrt_psd(gaussian_kernel(a, a, 2.0), floor), (w,))


def test_inv_sqrt_psd_values_and_duplicate_anchors():
    g = torch.Generator().manual_seed(1)
    A = torch.randn(5, 5, generator=g, dtype=torch.float64)
    K = A @ A.T + 0.5 * torch.eye(5, dtype=torch.float64)
    R = inv_sqrt_psd(K, 0.0)
    torch.testing.assert_close(R @ K @ R, torch.eye(5, dtype=torch.float64))
    # exactly repeated anchors: the kernel matrix is singular, gradients stay finite
    w = torch.randn(6, 3, generator=g, dtype=torch.float64)
    w[1] = w[0]
    w.requires_grad_()
    inv_sqrt_psd(gaussian_kernel(w, w, 1.0)).pow(2).sum().backward()
    assert torch.isfinite(w.grad).all() and w.grad.abs().sum() > 0
    # float32 in, float32 out, computed in float64 inside
    assert inv_sqrt_psd(K.float()).dtype == torch.float32


def test_inv_sqrt_psd_zero_matrix_is_zero():
    """No positive eigenvalue: the pseudo-inverse's answer, 0, in float32 and float64 and in a
    batch beside a regular matrix (it was the floor's inverse square root: inf in float32)."""
    K = torch.stack([torch.zeros(4, 4, dtype=torch.float64), 2.0 * torch.eye(4, dtype=torch.float64)])
    for dtype in (torch.float32, torch.float64):
        R = inv_sqrt_psd(K.to(dtype))
        assert torch.equal(R[0], torch.zeros(4, 4, dtype=dtype))
        torch.testing.assert_close(R[1], torch.eye(4, dtype=dtype) / 2 ** 0.5)
    Z = torch.zeros(3, 3, dtype=torch.float64, requires_grad=True)
    inv_sqrt_psd(Z).sum().backward()
    assert torch.equal(Z.grad, torch.zeros(3, 3, dtype=torch.float64))


def test_anchor_gram_exact_far_from_zero_and_far_apart():
    """The anchors' Gram matrix reads differences only: at an offset of 1e9 it is the one at 0,
    and anchors 1e10 apart give the identity (the expansion of the squared distances gave an
    all-zero matrix there, and an infinite normalisation)."""
    from skset.nn.nystrom import anchor_gram

    g = torch.Generator().manual_seed(2)
    w = torch.randn(7, 16, generator=g, dtype=torch.float64)
    torch.testing.assert_close(anchor_gram(w + 1e9, 1.5), gaussian_kernel(w, w, 1.5))
    far = anchor_gram(w * 1e10, 4.0)
    torch.testing.assert_close(far, torch.eye(7, dtype=torch.float64))
    assert gaussian_kernel(w * 1e10, w * 1e10, 4.0).diagonal().min() == 0  # what the expansion gives
    assert torch.isfinite(inv_sqrt_psd(far)).all()
    w = w[:, :3].clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda a: anchor_gram(a, 2.0), (w,))


def test_nystrom_partial_fit_on_far_chunk_transforms_finite():
    """A later chunk 1e10 times the first chunk's spread moves anchors that far: the map stays
    finite (its normalisation was infinite, and ``transform`` raised an overflow error)."""
    rng = np.random.default_rng(64)
    est = NystromFeatures(n_components=4, random_state=0).fit(_sets(rng, [3, 8, 5, 6, 4, 7], 64))
    far = [(rng.normal(size=(n, 64)) * 1e10).astype(np.float32) for n in (161, 47, 36)]
    est.partial_fit(far)
    assert np.isfinite(est.normalization_).all()
    assert all(np.isfinite(z).all() for z in est.transform(far))


# -- same numbers as the estimators --
@pytest.mark.parametrize("window,normalize", [(1, True), (3, True), (2, False)])
def test_nystrom_to_module_matches_transform(window, normalize):
    rng = np.random.default_rng(0)
    sets = _sets(rng, [7, 12, 5, 9])
    est = NystromFeatures(n_components=8, window=window, normalize=normalize, dtype="float64",
                          random_state=0).fit(sets)
    layer = est.to_module()
    assert layer.anchors.dtype == torch.float64 and layer.anchors.requires_grad
    X, M = _garbage_pack(sets)
    out, mask = layer(X, M)
    expected = est.transform(sets)
    for i, e in enumerate(expected):
        assert int(mask[i].sum()) == e.shape[0]
        np.testing.assert_allclose(out[i, : e.shape[0]].detach().numpy(), e, rtol=1e-10,
                                   atol=1e-12)
        assert (out[i, e.shape[0]:] == 0).all()  # padded windows are zero


def test_nystrom_layer_float32_matches_estimator():
    rng = np.random.default_rng(1)
    sets = _sets(rng, [20, 31, 14], d=5)
    est = NystromFeatures(n_components=16, window=2, random_state=0).fit(sets)
    layer = est.to_module()
    assert layer.anchors.dtype == torch.float32
    X, M = pack(sets, dtype=torch.float32)
    out, _ = layer(X, M)
    for i, e in enumerate(est.transform(sets)):
        np.testing.assert_allclose(out[i, : e.shape[0]].detach().numpy(), e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n_references,position_sigma", [(1, None), (2, 0.3)])
def test_otk_to_module_matches_raw_transform(n_references, position_sigma):
    rng = np.random.default_rng(2)
    sets = _sets(rng, [6, 11, 4, 8, 9], d=4)
    est = OTKEmbedding(n_supports=3, n_references=n_references, position_sigma=position_sigma,
                       center=False, normalize=False, dtype="float64", random_state=0).fit(sets)
    layer = est.to_module()
    assert layer.references.shape == (n_references, 3, 4) and layer.references.requires_grad
    X, M = _garbage_pack(sets)
    with torch.no_grad():  # the estimator's stopping tolerance applies (not under autograd)
        out = layer(X, M).reshape(len(sets), -1).numpy()
        P = layer.plans(X, M).numpy()
    np.testing.assert_allclose(out, est.transform(sets), rtol=1e-10, atol=1e-12)
    # plans agree with the estimator's transport_plan
    for i, ref in enumerate(est.transport_plan(sets)):
        np.testing.assert_allclose(P[i, :, : sets[i].shape[0]], ref, rtol=1e-10, atol=1e-14)


def test_stacked_layers_match_pipeline():
    rng = np.random.default_rng(3)
    sets = _sets(rng, [15, 9, 22, 12], d=3)
    nf = NystromFeatures(n_components=6, window=3, dtype="float64", random_state=0).fit(sets)
    feats = nf.transform(sets)
    otk = OTKEmbedding(n_supports=4, position_sigma=0.5, center=False, normalize=False,
                       dtype="float64", random_state=0).fit(feats)
    model_n, model_o = nf.to_module(), otk.to_module()
    X, M = _garbage_pack(sets)
    with torch.no_grad():  # the estimator's stopping tolerance applies (not under autograd)
        out = model_o(*model_n(X, M)).reshape(len(sets), -1).numpy()
    np.testing.assert_allclose(out, otk.transform(feats), rtol=1e-9, atol=1e-12)


# -- padding invariance and gradients --
def test_padding_invariance_and_no_gradient_to_padding():
    torch.manual_seed(0)
    nys = NystromLayer(3, 5, window=2).double()
    otk = OTKLayer(5, 4, 2, epsilon=0.3, position_sigma=0.4).double()
    rng = np.random.default_rng(4)
    short, long = _sets(rng, [6, 30])
    alone = otk(*nys(*pack([short], dtype=torch.float64)))
    X, M = _garbage_pack([short, long], extra=5)
    X.requires_grad_()
    batch = otk(*nys(X, M))
    torch.testing.assert_close(batch[0], alone[0], rtol=1e-10, atol=1e-12)
    batch.sum().backward()
    assert (X.grad[~M] == 0).all()
    assert (X.grad[M] != 0).any()


def test_padding_zero_skips_only_the_zeroing():
    # a Nystrom layer's padded rows are 0: the OTK layer told so (padding_zero=True, as the
    # supervised OTK network does) gives the outputs and gradients of the call that zeroes them;
    # the default still zeroes NaN padding
    torch.manual_seed(0)
    nys = NystromLayer(3, 5, window=2).double()
    otk = OTKLayer(5, 4, 2, epsilon=0.3, position_sigma=0.4).double()
    X, M = _garbage_pack(_sets(np.random.default_rng(5), [6, 30, 11]), extra=4)
    psi, kmask = nys(X, M)
    assert (psi[~kmask] == 0).all()

    def run(x, **kw):
        otk.zero_grad()
        out = otk(x, kmask, **kw)
        out.square().sum().backward()
        return out.detach(), otk.references.grad.clone()

    ref = run(psi.detach())
    fast = run(psi.detach(), padding_zero=True)
    nan = run(psi.detach().masked_fill(~kmask.unsqueeze(-1), float("nan")))
    for other in (fast, nan):
        torch.testing.assert_close(other[0], ref[0], rtol=0, atol=0)
        torch.testing.assert_close(other[1], ref[1], rtol=0, atol=0)


def test_gradcheck_reaches_anchors_and_references():
    torch.manual_seed(0)
    nys = NystromLayer(2, 4, window=2, bandwidth=0.8).double()
    otk = OTKLayer(4, 3, 2, epsilon=0.5, sinkhorn_iter=5, position_sigma=0.5).double()
    rng = np.random.default_rng(5)
    X, M = _garbage_pack(_sets(rng, [4, 6], d=2), extra=1)
    anchors0 = nys.anchors.detach().clone().requires_grad_()
    refs0 = otk.references.detach().clone().requires_grad_()

    def f(anchors, refs):
        # functional call so that gradcheck differentiates through the parameters
        feats, mask = torch.func.functional_call(nys, {"anchors": anchors}, (X, M))
        return torch.func.functional_call(otk, {"references": refs}, (feats, mask))

    assert torch.autograd.gradcheck(f, (anchors0, refs0), atol=1e-6, fast_mode=True)
    # and a plain backward fills .grad of both Parameters
    out = otk(*nys(X, M))
    out.square().sum().backward()
    assert nys.anchors.grad.abs().sum() > 0 and otk.references.grad.abs().sum() > 0


@pytest.mark.parametrize("method", ["log", "exp", "auto"])
def test_otk_layer_methods_agree_and_mask_default(method):
    torch.manual_seed(1)
    layer = OTKLayer(3, 4, epsilon=0.5, method=method).double()
    x = torch.randn(2, 7, 3, dtype=torch.float64)
    ref = OTKLayer(3, 4, epsilon=0.5, method="log", references=layer.references.data).double()
    torch.testing.assert_close(layer(x), ref(x))
    assert layer(x).shape == (2, 4, 3)


def test_layer_errors():
    with pytest.raises(ValueError, match="references must have shape"):
        OTKLayer(3, 4, 2, references=torch.zeros(1, 4, 3))
    # sequences shorter than the k-mer window: one k-mer each, the last element repeated
    nys = NystromLayer(2, 3, window=4).double()
    x = torch.randn(2, 3, 2, dtype=torch.float64)
    mask = torch.tensor([[True, True, True], [True, True, False]])
    out, kmask = nys(x, mask)
    assert out.shape == (2, 1, 3) and kmask.tolist() == [[True], [True]]
    ref, _ = nys(x[1:, [0, 1, 1, 1]], torch.ones(1, 4, dtype=torch.bool))
    # equal to rounding: a batch of another shape may take another matrix-product kernel (on
    # 16 CPU threads the two differed by 1e-18)
    torch.testing.assert_close(out[1:], ref, rtol=1e-12, atol=1e-15)


# -- positional weighting modes --
def _naive_position_embedding(x, refs, eps, sigma, mode):
    """One unpadded set, numpy and POT: the plan of each reference on the modified kernel, times
    S, pooled: ``sqrt(p / q) P^T x`` per reference."""
    import ot as pot

    q, p, _ = refs.shape
    n = len(x)
    i = np.arange(n)[:, None] / n
    j = np.arange(p)[None] / p
    S = np.exp(-((i - j) ** 2) / sigma**2)
    out = []
    for z in refs:
        K = x @ z.T
        if mode == "plan":
            M = -K
        elif mode == "kernel":  # exp(-M / eps) = exp(K / eps) * S
            M = -(K + eps * np.log(S))
        else:  # "similarity": exp((K * S) / eps), the authors' code
            M = -(K * S)
        P = pot.bregman.sinkhorn_log(np.full(n, 1 / n), np.full(p, 1 / p), M, reg=eps,
                                     numItermax=100000, stopThr=1e-15)
        out.append(np.sqrt(p / q) * (P * S).T @ x)
    return np.concatenate(out)


@pytest.mark.parametrize("mode", ["plan", "kernel", "similarity"])
@pytest.mark.parametrize("n_references", [1, 2])
def test_position_modes_match_naive_loop(mode, n_references):
    rng = np.random.default_rng(6)
    sets = _sets(rng, [9, 4, 13, 1], d=3)
    torch.manual_seed(0)
    eps, sigma = 0.4, 0.3
    layer = OTKLayer(3, 5, n_references, epsilon=eps, sinkhorn_iter=5000, sinkhorn_tol=1e-13,
                     position_sigma=sigma, position_mode=mode).double()
    X, M = _garbage_pack(sets)
    with torch.no_grad():
        out = layer(X, M).numpy()
    refs = layer.references.detach().numpy()
    for b, s in enumerate(sets):
        np.testing.assert_allclose(out[b], _naive_position_embedding(s, refs, eps, sigma, mode),
                                   rtol=1e-9, atol=1e-11)


def test_position_modes_differ_and_kernel_mode_follows_positions():
    """'kernel' puts positions into the plan itself: the plan (before the final S) is no longer
    the content-only plan of 'plan', and it sends each element's mass to nearby supports."""
    from skset.nn.otk import otk_plans

    rng = np.random.default_rng(7)
    x = torch.as_tensor(rng.normal(size=(1, 20, 3)))
    refs = torch.as_tensor(rng.normal(size=(1, 5, 3)))
    mask = torch.ones(1, 20, dtype=torch.bool)
    plans = {m: otk_plans(x, mask, refs, epsilon=0.5, sinkhorn_iter=300, position_sigma=0.2,
                          position_mode=m)[0, 0] for m in ("plan", "kernel", "similarity")}
    assert (plans["kernel"] - plans["plan"]).abs().max() > 1e-3
    assert (plans["similarity"] - plans["plan"]).abs().max() > 1e-3
    # mean |i/n - j/p| under the plan: smaller when Sinkhorn sees the positions
    i = torch.arange(20.0)[:, None] / 20
    j = torch.arange(5.0)[None] / 5
    spread = {m: float((P * (i - j).abs()).sum() / P.sum()) for m, P in plans.items()}
    assert spread["kernel"] < spread["plan"]


@pytest.mark.parametrize("mode", ["kernel", "similarity"])
def test_position_modes_padding_invariance_and_gradcheck(mode):
    torch.manual_seed(0)
    otk = OTKLayer(3, 4, 2, epsilon=0.3, sinkhorn_iter=8, position_sigma=0.4,
                   position_mode=mode).double()
    rng = np.random.default_rng(4)
    short, long = _sets(rng, [6, 30])
    alone = otk(*pack([short], dtype=torch.float64))
    X, M = _garbage_pack([short, long], extra=5)
    X.requires_grad_()
    batch = otk(X, M)
    torch.testing.assert_close(batch[0], alone[0], rtol=1e-10, atol=1e-12)
    batch.sum().backward()
    assert (X.grad[~M] == 0).all() and (X.grad[M] != 0).any()
    Xs, Ms = _garbage_pack(_sets(rng, [4, 2], d=3), extra=1)
    refs0 = otk.references.detach().clone().requires_grad_()
    Xs.requires_grad_()

    def f(x, refs):
        return torch.func.functional_call(otk, {"references": refs}, (x, Ms))

    assert torch.autograd.gradcheck(f, (Xs, refs0), atol=1e-6)


@pytest.mark.parametrize("method", ["auto", "log"])
def test_kernel_mode_small_sigma_stays_finite(method):
    """log S down to -1e6 here (sigma 1e-3): the row-shifted, floored log weights keep the
    Sinkhorn input finite, in float32 too, and gradients finite."""
    torch.manual_seed(0)
    layer = OTKLayer(3, 6, epsilon=0.05, position_sigma=1e-3, position_mode="kernel",
                     method=method)
    x = torch.randn(3, 25, 3)
    mask = torch.arange(25) < torch.tensor([[25], [11], [2]])
    out = layer(x, mask)
    assert torch.isfinite(out).all()
    out.square().sum().backward()
    assert torch.isfinite(layer.references.grad).all()


def test_position_mode_errors_and_to_module():
    from skset.nn.otk import otk_plans

    with pytest.raises(ValueError, match="position_mode"):
        OTKLayer(3, 4, position_mode="after")
    with pytest.raises(ValueError, match="position_mode"):
        otk_plans(torch.zeros(1, 2, 3), torch.ones(1, 2, dtype=torch.bool), torch.zeros(1, 4, 3),
                  epsilon=0.5, position_sigma=0.5, position_mode="x")
    rng = np.random.default_rng(8)
    sets = _sets(rng, [6, 11, 4, 8], d=3)
    with pytest.raises(ValueError, match="position_mode"):
        OTKEmbedding(position_mode="x").fit(sets)
    est = OTKEmbedding(n_supports=3, position_sigma=0.3, position_mode="kernel", center=False,
                       normalize=False, dtype="float64", random_state=0).fit(sets)
    layer = est.to_module()
    assert layer.position_mode == "kernel" and layer.sinkhorn_tol == est.sinkhorn_tol
    X, M = _garbage_pack(sets)
    with torch.no_grad():
        out = layer(X, M).reshape(len(sets), -1).numpy()
    np.testing.assert_allclose(out, est.transform(sets), rtol=1e-10, atol=1e-12)
    plain = OTKEmbedding(n_supports=3, position_sigma=0.3, position_mode="plan", center=False,
                         normalize=False, dtype="float64", random_state=0).fit(sets)
    assert np.abs(plain.transform(sets) - est.transform(sets)).max() > 1e-4


def test_gaussian_kernel_training_forward_is_the_inference_one():
    # the same operations in the same order with or without autograd: a network's training
    # forward equals its transform to the bit; the clamp at 0 (a point on an anchor) has a
    # correct gradient
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 3, generator=g, dtype=torch.float64)
    w = torch.randn(4, 3, generator=g, dtype=torch.float64)
    x[0, 0] = w[0]
    with torch.no_grad():
        ref = gaussian_kernel(x, w, 0.7)
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    assert torch.equal(gaussian_kernel(xg, wg, 0.7), ref)
    assert torch.autograd.gradcheck(lambda a, b: gaussian_kernel(a, b, 0.7), (xg, wg))


@pytest.mark.parametrize("kw", [dict(n_supports=0), dict(n_references=0), dict(in_features=0),
                                dict(sinkhorn_iter=2.7), dict(n_supports=True),
                                dict(position_sigma=-1.0), dict(position_sigma=0.0)])
def test_layer_refuses_bad_sizes_and_widths(kw):
    # n_supports=0 divided by zero; 2.7 iterations were cut to 2; a negative width acted as +1
    with pytest.raises(ValueError, match=next(iter(kw))):
        OTKLayer(**{"in_features": 3, **kw})


def test_layer_input_offset_is_a_shift_of_sets_and_references():
    """``OTKLayer(input_offset=o)`` with references ``z`` embeds ``x`` as the layer without it
    embeds ``x`` against ``z + o`` (float64, positions in each balanced mode), padding of NaN
    ignored; its gradients pass gradcheck; unbalanced plans, similarity positions and a wrong
    shape are refused."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 7, 2, generator=g, dtype=torch.float64) + 5.0
    mask = torch.arange(7) < torch.tensor([[7], [4], [2]])
    x = x.masked_fill(~mask.unsqueeze(-1), float("nan"))
    off = torch.tensor([5.0, 4.0], dtype=torch.float64)
    # converged plans (the shift adds a term per support that the iterations absorb: at 30
    # iterations 2 of 600 random layers differed by 3e-6)
    for kw in ({}, {"position_sigma": 0.5}, {"position_sigma": 0.5, "position_mode": "plan"}):
        plain = OTKLayer(2, 3, epsilon=0.5, sinkhorn_iter=300, **kw).double()
        shifted = OTKLayer(2, 3, epsilon=0.5, sinkhorn_iter=300, input_offset=off,
                           references=plain.references.detach() - off, **kw).double()
        torch.testing.assert_close(shifted(x, mask), plain(x, mask))
        torch.testing.assert_close(shifted.plans(x, mask), plain.plans(x, mask))
    small = OTKLayer(2, 2, epsilon=0.5, sinkhorn_iter=5, position_sigma=0.5,
                     input_offset=off).double()
    xs = torch.randn(2, 3, 2, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, r: torch.func.functional_call(
        small, {"references": r}, (a, None)), (xs, small.references.detach().requires_grad_()))
    for bad in ({"reg_m": 1.0}, {"position_sigma": 0.5, "position_mode": "similarity"}):
        with pytest.raises(ValueError, match="balanced"):
            OTKLayer(2, 3, input_offset=off, **bad)
    with pytest.raises(ValueError, match="shape"):
        OTKLayer(2, 3, input_offset=torch.zeros(3))


def test_layer_input_offset_refuses_nan_and_a_later_unbalanced_setting():
    off = torch.tensor([1.0, float("nan")])
    with pytest.raises(ValueError, match="finite"):
        OTKLayer(2, 3, input_offset=off)
    layer = OTKLayer(2, 3, input_offset=torch.ones(2))
    layer.reg_m = 1.0  # set after construction: the forward checks again
    with pytest.raises(ValueError, match="balanced"):
        layer(torch.randn(2, 4, 2))


@pytest.mark.parametrize("mode", ["kernel", "plan", "similarity"])
def test_positions_count_real_elements_whatever_the_masks_layout(mode):
    """A set padded at its start (mask ``[F, T, T, T]``) takes the positions ``i/n`` of its
    real elements' ranks, 0, 1/3, 2/3, as alone (they came from the padded index: the embedding
    was 0.62 away from the set's alone)."""
    from skset.nn import otk_embed

    torch.manual_seed(0)
    x = torch.randn(1, 3, 2, dtype=torch.float64)
    Z = torch.randn(1, 3, 2, dtype=torch.float64)
    xp = torch.cat([torch.full((1, 1, 2), float("nan"), dtype=torch.float64), x], 1)
    mask = torch.tensor([[False, True, True, True]])
    kw = dict(epsilon=0.5, sinkhorn_iter=50, position_sigma=0.3, position_mode=mode)
    torch.testing.assert_close(otk_embed(xp, mask, Z, **kw), otk_embed(x, None, Z, **kw))


@pytest.mark.parametrize("method", ["log", "auto"])
def test_kernel_positions_stay_sharp_beside_large_similarities(method):
    """``position_mode="kernel"`` at a small ``sigma`` and ``epsilon``, where the similarities
    over epsilon spread by 3e4 within a row: far supports stay blocked (the log weights were
    floored at -1e4 and lost to the similarities: the embedding off by its own size). POT's
    plan on the exact weights is the reference."""
    pytest.importorskip("ot")
    rng = np.random.default_rng(11)
    x = rng.normal(size=(4, 2)) * 10
    refs = rng.normal(size=(1, 4, 2)) * 10
    eps, sigma = 0.01, 0.001  # off-diagonal log weights -62,500: the plan is the diagonal
    out = otk_embed(torch.tensor(x)[None], None, torch.tensor(refs), epsilon=eps,
                    sinkhorn_iter=200, position_sigma=sigma, position_mode="kernel",
                    method=method)[0, 0].numpy()
    np.testing.assert_allclose(out, _naive_position_embedding(x, refs, eps, sigma, "kernel"),
                               rtol=1e-9, atol=1e-9)
