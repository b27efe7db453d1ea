"""Tests of the pure-torch set modules: masking, SetNorm formula, scaling, gradients."""

import numpy as np
import pytest
import torch

from skset.nn import (
    ISAB,
    MAB,
    PMA,
    SAB,
    DeepSets,
    MultiheadAttention,
    SetNorm,
    SetTransformer,
    masked_pool,
    set_norm,
)

torch.set_num_threads(1)
DT = torch.float64
NORMS = ["layer", "set", None]
RESIDUALS = ["original", "clean"]


def _seeded(fn, seed=0):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return fn()


def _pair(dim, n_short=5, n_long=11, seed=0):
    """A short set alone, and the same set padded with garbage in a batch beside a longer one."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(1, n_short, dim, generator=g, dtype=DT)
    b = torch.randn(1, n_long, dim, generator=g, dtype=DT)
    garbage = 1e3 * torch.randn(1, n_long - n_short, dim, generator=g, dtype=DT)
    X = torch.cat([torch.cat([a, garbage], 1), b])
    mask = torch.zeros(2, n_long, dtype=torch.bool)
    mask[0, :n_short] = True
    mask[1] = True
    return a, b, X, mask


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("residual", RESIDUALS)
@pytest.mark.parametrize("kind", ["SAB", "ISAB", "PMA", "ST_SAB", "ST_ISAB"])
def test_padding_invariance_attention(kind, norm, residual):
    dim = 8
    make = {
        "SAB": lambda: SAB(dim, 2, norm=norm, residual=residual),
        "ISAB": lambda: ISAB(dim, 2, 3, norm=norm, residual=residual),
        "PMA": lambda: PMA(dim, 2, 2, norm=norm, residual=residual),
        "ST_SAB": lambda: SetTransformer(dim, 8, 3, 2, 2, norm=norm, residual=residual),
        "ST_ISAB": lambda: SetTransformer(dim, 8, 3, 2, 2, n_inducing=4, n_seeds=2, norm=norm,
                                          residual=residual),
    }[kind]
    m = _seeded(make).to(DT)
    a, b, X, mask = _pair(dim)
    alone = m(a)
    batched = m(X, mask)
    n = alone.shape[1]
    torch.testing.assert_close(batched[0, :n] if alone.dim() == 3 else batched[0], alone[0],
                               rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(batched[1], m(b)[0], rtol=1e-10, atol=1e-10)
    assert torch.isfinite(batched[0]).all()


def test_padding_invariance_mab_both_masks():
    dim = 8
    m = _seeded(lambda: MAB(dim, 4, norm="set", residual="clean")).to(DT)
    a, _, X, mask = _pair(dim)
    c, _, Y, ymask = _pair(dim, 3, 7, seed=1)
    out = m(X, Y, mask, ymask)
    torch.testing.assert_close(out[0, :5], m(a, c)[0], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("residual", [None, "original", "clean"])
@pytest.mark.parametrize("pooling", ["sum", "mean", "max"])
def test_padding_invariance_deep_sets(norm, residual, pooling):
    m = _seeded(lambda: DeepSets(4, 8, 2, 3, norm=norm, residual=residual,
                                 pooling=pooling)).to(DT)
    a, b, X, mask = _pair(4)
    out = m(X, mask)
    torch.testing.assert_close(out[0], m(a)[0], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(out[1], m(b)[0], rtol=1e-10, atol=1e-10)


def test_masked_pool_values():
    x = torch.tensor([[[1.0], [5.0], [100.0]], [[2.0], [3.0], [4.0]]], dtype=DT)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    assert masked_pool(x, mask, "sum")[:, 0].tolist() == [6.0, 9.0]
    assert masked_pool(x, mask, "mean")[:, 0].tolist() == [3.0, 3.0]
    assert masked_pool(x, mask, "max")[:, 0].tolist() == [5.0, 4.0]
    # the mean times size: 3 x 2.5 and 3 x 2.5; on a set of `size` elements the sum itself
    assert masked_pool(x, mask, "scaled_mean", 2.5)[:, 0].tolist() == [7.5, 7.5]
    assert masked_pool(x, mask, "scaled_mean", 3.0)[1, 0].item() == 9.0
    with pytest.raises(ValueError, match="'scaled_mean'"):
        masked_pool(x, mask, "median")
    # a row without a real element pools to 0 by every pooling (the max was finfo.min, and a
    # pooled skip or max-pooling network gave -inf on it)
    empty = torch.tensor([[True, True, False], [False, False, False]])
    for how in ("sum", "mean", "max", "scaled_mean"):
        out = masked_pool(x, empty, how, 2.0)
        assert out[1, 0].item() == 0.0 and out[0, 0].item() != 0.0, how


def test_scaled_mean_is_the_sum_on_sets_of_its_size_and_ignores_padding():
    torch.manual_seed(0)
    x = torch.randn(4, 7, 5, dtype=torch.float32)
    # no mask, or every element real: bit for bit the sum when size is the sets' size
    full = torch.ones(4, 7, dtype=torch.bool)
    assert torch.equal(masked_pool(x, None, "scaled_mean", 7.0), masked_pool(x, None, "sum"))
    assert torch.equal(masked_pool(x, full, "scaled_mean", 7.0), masked_pool(x, full, "sum"))
    # sets of 3, 5 and 7 elements padded to 7 (padding of any value): each set's mean times
    # size, as the set alone without padding gives it
    lengths = torch.tensor([3, 5, 7, 1])
    mask = torch.arange(7) < lengths[:, None]
    padded = torch.where(mask[..., None], x, torch.full_like(x, 1e6))
    out = masked_pool(padded, mask, "scaled_mean", 4.5)
    for i, n in enumerate(lengths.tolist()):
        alone = masked_pool(x[i:i + 1, :n], None, "scaled_mean", 4.5)
        torch.testing.assert_close(out[i:i + 1], alone)
        torch.testing.assert_close(out[i], x[i, :n].mean(0) * 4.5)


def test_sized_mean_layer_reads_the_size_and_ignores_padding():
    from skset.nn import DeepSets

    torch.manual_seed(0)
    sized = DeepSets(4, 8, 3, pooling="sized_mean", pool_size=5.0).double()
    torch.manual_seed(0)
    scaled = DeepSets(4, 8, 3, pooling="scaled_mean", pool_size=5.0).double()
    x = torch.randn(3, 9, 4, dtype=DT)
    lengths = torch.tensor([2, 5, 9])
    mask = torch.arange(9) < lengths[:, None]
    # its size vector starts at zero and draws nothing: the scaled mean's network, bit for bit
    assert torch.equal(sized(x, mask), scaled(x, mask))
    with torch.no_grad():
        sized.size_weight.copy_(torch.linspace(-1.0, 1.0, 8, dtype=DT))
    out = sized(torch.where(mask[..., None], x, torch.full_like(x, 1e6)), mask)
    for i, n in enumerate(lengths.tolist()):  # padding of any value: each set as alone
        torch.testing.assert_close(out[i:i + 1], sized(x[i:i + 1, :n]))
    # a set of pool_size elements: log(5 / 5) = 0, the scaled mean's output; other sizes differ
    # (to rounding: the padded batch and the lone set can take different kernels, as on a GPU)
    torch.testing.assert_close(out[1], scaled(x[1:2, :5])[0], rtol=1e-12, atol=1e-15)
    assert not torch.allclose(out[0], scaled(x[:1, :2])[0])
    torch.testing.assert_close(sized.log_size(x, mask)[:, 0], torch.log(lengths / 5.0).to(DT))
    # gradients of the inputs and of the size vector, padded sets of three sizes
    xs = x.clone().requires_grad_(True)
    w = sized.size_weight.detach().clone().requires_grad_(True)
    torch.autograd.gradcheck(
        lambda x_, w_: torch.func.functional_call(sized, {"size_weight": w_}, (x_, mask)), (xs, w))


def test_set_norm_matches_formula_on_unpadded_sets():
    rng = np.random.default_rng(0)
    sets = [rng.normal(3.0, 2.0, size=(n, 4)) for n in (2, 6, 9)]
    gamma, beta = rng.normal(size=4), rng.normal(size=4)
    X = torch.zeros(3, 9, 4, dtype=DT) + 77.0  # padding value must not matter
    mask = torch.zeros(3, 9, dtype=torch.bool)
    for i, s in enumerate(sets):
        X[i, : len(s)] = torch.from_numpy(s)
        mask[i, : len(s)] = True
    sn = SetNorm(4).to(DT)
    with torch.no_grad():
        sn.weight.copy_(torch.from_numpy(gamma))
        sn.bias.copy_(torch.from_numpy(beta))
    out = sn(X, mask).detach().numpy()
    for i, s in enumerate(sets):
        expected = (s - s.mean()) / np.sqrt(s.var() + sn.eps) * gamma + beta
        np.testing.assert_allclose(out[i, : len(s)], expected, rtol=1e-10, atol=1e-10)
    # statistics over all features jointly, not per feature (that would be a different norm)
    s = sets[1]
    assert not np.allclose(out[1, :6], (s - s.mean(0)) / s.std(0) * gamma + beta)


def test_set_norm_unmasked_and_gradcheck():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 3, generator=g, dtype=DT, requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    w = torch.randn(3, generator=g, dtype=DT, requires_grad=True)
    torch.autograd.gradcheck(lambda x, w: set_norm(x, mask, weight=w), (x, w))
    full = set_norm(x[1:], None)
    torch.testing.assert_close(full, set_norm(x[1:], mask[1:]))


def test_attention_per_head_scaling_matches_torch_mha():
    """Scores are scaled by 1/sqrt(head_dim) and heads go through an output projection."""
    dim, heads = 16, 4
    ours = _seeded(lambda: MultiheadAttention(dim, heads)).to(DT)
    ref = torch.nn.MultiheadAttention(dim, heads, batch_first=True).to(DT)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight,
                                            ours.v_proj.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)
    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 3, dim, generator=g, dtype=DT)
    kv = torch.randn(2, 7, dim, generator=g, dtype=DT)
    mask = torch.ones(2, 7, dtype=torch.bool)
    mask[0, 4:] = False
    expected, _ = ref(q, kv, kv, key_padding_mask=~mask)
    torch.testing.assert_close(ours(q, kv, kv, mask), expected, rtol=1e-10, atol=1e-10)


def test_attention_gradcheck_with_mask():
    m = _seeded(lambda: MultiheadAttention(4, 2)).to(DT)
    g = torch.Generator().manual_seed(2)
    q = torch.randn(2, 2, 4, generator=g, dtype=DT, requires_grad=True)
    kv = torch.randn(2, 3, 4, generator=g, dtype=DT, requires_grad=True)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    torch.autograd.gradcheck(lambda q, kv: m(q, kv, kv, mask), (q, kv))


@pytest.mark.parametrize("residual", RESIDUALS)
def test_equivariance_and_invariance(residual):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 9, 8, generator=g, dtype=DT)
    perm = torch.randperm(9, generator=g)
    sab = _seeded(lambda: SAB(8, 2, norm="set", residual=residual)).to(DT)
    isab = _seeded(lambda: ISAB(8, 2, 4, norm="set", residual=residual)).to(DT)
    pma = _seeded(lambda: PMA(8, 2, 3, norm="set", residual=residual)).to(DT)
    for m in (sab, isab):
        torch.testing.assert_close(m(x[:, perm]), m(x)[:, perm])
    torch.testing.assert_close(pma(x[:, perm]), pma(x))


def test_bad_options():
    with pytest.raises(ValueError, match="divisible"):
        SAB(10, 3)
    with pytest.raises(ValueError, match="residual"):
        SAB(8, 2, residual="pre")
    with pytest.raises(ValueError, match="norm"):
        ISAB(8, 2, 4, norm="batch")
    with pytest.raises(ValueError, match="n_inducing"):
        ISAB(8, 2, 0)
    with pytest.raises(ValueError, match="n_seeds"):
        PMA(8, 2, 0)


def _block_grad_norms(model, x, y):
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    blocks = model.blocks if hasattr(model, "blocks") else model.encoder.blocks
    return np.array([torch.sqrt(sum((p.grad ** 2).sum() for p in b.parameters())).item()
                     for b in blocks])


def test_gradient_conditioning_16_isab_layers():
    """First/last layer gradient norm ratio at init: the clean path (ISAB++) stays near 1."""
    g = torch.Generator().manual_seed(0)
    x = 3 * torch.randn(16, 60, 1, generator=g, dtype=DT) + 5 * torch.randn(16, 1, 1, generator=g,
                                                                          dtype=DT)
    y = 10 * torch.rand(16, 1, generator=g, dtype=DT)
    logs = {}
    for norm, residual in [("layer", "original"), (None, "original"), ("set", "clean")]:
        ratios = []
        for seed in range(3):
            m = _seeded(lambda n=norm, r=residual: SetTransformer(
                1, 16, 1, 16, 4, n_inducing=4, norm=n, residual=r), seed).to(DT)
            gn = _block_grad_norms(m, x, y)
            assert np.isfinite(gn).all()
            ratios.append(gn[0] / gn[-1])
        logs[(norm, residual)] = np.abs(np.log(ratios))
    clean = logs[("set", "clean")]
    assert clean.max() < np.log(2.5)
    assert clean.mean() < logs[("layer", "original")].mean()
    assert clean.mean() < 0.5 * logs[(None, "original")].mean()


def test_gradient_deep_sets_plain_vanishes_ds_pp_does_not():
    g = torch.Generator().manual_seed(0)
    x = 3 * torch.randn(8, 40, 1, generator=g, dtype=DT)
    y = torch.ones(8, 1, dtype=DT)
    plain = _seeded(lambda: DeepSets(1, 16, 1, 16)).to(DT)
    dspp = _seeded(lambda: DeepSets(1, 16, 1, 16, norm="set", residual="clean")).to(DT)
    gp = _block_grad_norms(plain, x, y)
    gc = _block_grad_norms(dspp, x, y)
    assert gp[0] / gp[-1] < 1e-2
    assert 1 / 3 < gc[0] / gc[-1] < 3


def test_point_init_and_paper_decoder():
    # defaults unchanged: the same parameters, names and values as before the options existed
    base = _seeded(lambda: SetTransformer(3, 8, 2, n_inducing=4, n_heads=2))
    explicit = _seeded(lambda: SetTransformer(3, 8, 2, n_inducing=4, n_heads=2,
                                              point_init="xavier", decoder="mlp"))
    assert base.pool_sab is None and not any("pool_sab" in k for k in base.state_dict())
    for (k, v), (k2, v2) in zip(base.state_dict().items(), explicit.state_dict().items(),
                                strict=True):
        assert k == k2
        torch.testing.assert_close(v, v2)
    bound = (6 / (4 + 8)) ** 0.5
    assert float(base.blocks[0].inducing.detach().abs().max()) <= bound
    normal = _seeded(lambda: ISAB(64, 4, 32, point_init="normal"))
    assert 0.9 < float(normal.inducing.detach().std()) < 1.1
    seeds = _seeded(lambda: PMA(64, 4, 16, point_init="normal")).seeds.detach()
    assert 0.9 < float(seeds.std()) < 1.1
    # the paper's decoder rFF(SAB(PMA_k)): a SAB over the k seeds, padding- and
    # permutation-invariant like the rest
    for norm, residual in [("layer", "original"), ("set", "clean")]:
        net = _seeded(lambda n=norm, r=residual: SetTransformer(
            8, 8, 3, n_heads=2, n_seeds=3, norm=n, residual=r, decoder="sab",
            n_decoder_layers=0)).to(DT)
        assert isinstance(net.pool_sab, SAB) and len(net.decoder) == 1
        a, b, X, mask = _pair(8)
        torch.testing.assert_close(net(X, mask)[:1], net(a))
        torch.testing.assert_close(net(X, mask)[1:], net(b))
        perm = torch.randperm(11, generator=torch.Generator().manual_seed(0))
        torch.testing.assert_close(net(b[:, perm]), net(b))
        assert net.embed(a).shape == (1, 24)
    with pytest.raises(ValueError, match="point_init"):
        SetTransformer(3, 8, 2, n_heads=2, point_init="zeros")
    with pytest.raises(ValueError, match="point_init"):
        PMA(8, 2, point_init="zeros")
    with pytest.raises(ValueError, match="decoder"):
        SetTransformer(3, 8, 2, n_heads=2, decoder="rnn")


def test_a_set_without_real_elements_in_a_batch_stays_finite_on_any_softmax(monkeypatch):
    # a fully masked row: its recorded weights are 0 (they were NaN), and with the plain softmax
    # of torch < 2.5's math kernel (a masked row of -inf gives NaN) the outputs and gradients
    # stay finite: the row attends to its zeroed values instead
    import torch.nn.functional as F

    from skset.nn import SetTransformer, record_attention

    torch.manual_seed(0)
    x = torch.randn(2, 4, 3)
    m = torch.tensor([[True, True, True, False], [False] * 4])
    net = SetTransformer(3, 8, 2, n_layers=1, n_heads=2, n_inducing=None)
    with record_attention(net) as rec:
        net(x, m)
    assert not rec["blocks.0"][1].any() and not rec["pool"][1].any()

    def plain_sdpa(q, k, v, attn_mask=None, scale=None, **kw):
        s = (q @ k.transpose(-1, -2)) * scale
        return torch.softmax(s.masked_fill(~attn_mask, -float("inf")), -1) @ v

    monkeypatch.setattr(F, "scaled_dot_product_attention", plain_sdpa)
    out = net(x, m)
    out[0].sum().backward()
    assert torch.isfinite(out).all()
    assert all(torch.isfinite(p.grad).all() for p in net.parameters() if p.grad is not None)


def test_padding_finite_skips_only_the_zeroing():
    # the blocks' inner calls pass padding_finite=True: finite values in the padded rows give
    # the outputs and gradients of zeroed padding; a set without a real key gets an attention
    # output of 0 (the output projection's bias after it) whatever its rows hold
    g = torch.Generator().manual_seed(0)
    q, kv = torch.randn(3, 4, 8, generator=g, dtype=DT), torch.randn(3, 6, 8, generator=g, dtype=DT)
    qm = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]], dtype=torch.bool)
    km = torch.tensor([[1, 1, 1, 0, 0, 0], [1] * 6, [0] * 6], dtype=torch.bool)
    zq, zkv = q * qm[..., None], kv * km[..., None]
    garbage = kv.masked_fill(~km[..., None], 1e3)
    for module in (_seeded(lambda: MultiheadAttention(8, 2)).to(DT),
                   _seeded(lambda: MAB(8, 2, norm="set", residual="clean")).to(DT),
                   _seeded(lambda: MAB(8, 2, norm="layer")).to(DT)):
        mha = module if isinstance(module, MultiheadAttention) else module.attn

        def run(*args, module=module, **kw):
            module.zero_grad()
            out = module(*args, **kw)
            (out * qm[..., None]).square().sum().backward()
            return out * qm[..., None], [p.grad.clone() for p in module.parameters()]

        if module is mha:
            ref = run(zq, zkv, zkv, km, qm)
            fin = run(zq, garbage, garbage, km, qm, padding_finite=True)
            nan = run(q.masked_fill(~qm[..., None], float("nan")),
                      kv.masked_fill(~km[..., None], float("inf")), kv, km, qm)
        else:
            ref = run(zq, zkv, qm, km)
            fin = run(zq, garbage, qm, km, padding_finite=True)
            nan = run(q.masked_fill(~qm[..., None], float("nan")),
                      kv.masked_fill(~km[..., None], float("nan")), qm, km)
        for other in (fin, nan):
            torch.testing.assert_close(other[0], ref[0], rtol=1e-12, atol=1e-12)
            for a, b in zip(other[1], ref[1], strict=True):
                torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    with torch.no_grad():  # the set without a real key: the bias of the output projection
        out = mha(zq, garbage, garbage, km, qm, padding_finite=True)
    torch.testing.assert_close(out[2, 0], mha.out_proj.bias)


def test_self_attention_with_a_key_mask_only_zeroes_nan_query_padding():
    # the queries are the keys: their padding is the keys' (NaN padded queries once gave NaN
    # gradients to q_proj and out_proj when only the key mask was passed)
    from skset.nn import MultiheadAttention

    torch.manual_seed(0)
    m = MultiheadAttention(8, 2)
    q = torch.randn(2, 5, 8)
    mask = torch.arange(5) < torch.tensor([[5], [2]])
    q[~mask] = float("nan")
    out = m(q, q, q, mask)
    out[mask].sum().backward()
    assert torch.isfinite(out[mask]).all()
    assert all(torch.isfinite(p.grad).all() for p in m.parameters())
    ref = m(q, q, q, mask, mask)  # with the query mask given as well: the same real rows
    torch.testing.assert_close(out[mask], ref[mask])


@pytest.mark.parametrize("eps", [0, 0.0, -1e-5, float("nan"), float("inf"), True, "1e-5", None])
def test_set_norm_refuses_eps_that_is_not_positive(eps):
    """``eps=0`` divided a set of equal values by a zero deviation: NaN rows, silently."""
    x = torch.ones(1, 3, 2)
    with pytest.raises(ValueError, match="eps"):
        set_norm(x, eps=eps)
    with pytest.raises(ValueError, match="eps"):
        SetNorm(2, eps=eps)
    assert torch.equal(set_norm(x, eps=np.float32(1e-5)), torch.zeros(1, 3, 2))
