"""Gradients, padding invariance and permutation symmetry of the ``skset.nn`` modules whose
gradients no other test file checks: masked pooling, the pooled skip, Deep Sets and its blocks,
set norm, the Nystrom layer and its k-mers, the dilated kernels' responses, the spectral functions
and the reading of masks.

Each module is checked three ways on tiny float64 batches of sets of different sizes:
``torch.autograd.gradcheck`` against central differences (inputs and parameters); the same set
alone against it inside a padded batch with garbage (large values, NaN or infinity, as
``docs/input_contract.rst`` allows) in the padded rows, for the outputs, the input gradients (zero
on the padded rows) and the parameter gradients; and a permutation of each set's real elements.
"""

import pytest
import torch
from torch.autograd import gradcheck
from torch.func import functional_call

from skset.nn import (
    DeepSets,
    DeepSetsBlock,
    DeepSetsEncoder,
    NystromLayer,
    PooledLinear,
    SetNorm,
    kernel_responses,
    kmer_level_shape,
    kmer_unfold,
    laplacian_eigh,
    masked_pool,
    normalized_laplacian,
    nystrom_map,
    set_norm,
    spectral_embedding,
)

DT = torch.float64
TOL = {"rtol": 1e-10, "atol": 1e-12}
SIZES = (3, 5, 2)  # the longest set is not the first one
GARBAGE = ("large", "nan", "inf")


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _seeded(fn, seed=0):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return fn()


def _sets(sizes=SIZES, d=3, seed=0):
    g = _gen(seed)
    return [torch.randn(n, d, generator=g, dtype=DT) for n in sizes]


def _fill(shape, garbage, seed=1):
    """Padding values: ``1e6`` times normal draws, NaN, or infinities of both signs."""
    if garbage == "large":
        return 1e6 * torch.randn(shape, generator=_gen(seed), dtype=DT)
    if garbage == "nan":
        return torch.full(shape, float("nan"), dtype=DT)
    sign = torch.ones(shape, dtype=DT)
    sign.view(-1)[::2] = -1.0
    return sign * float("inf")


def _pack(sets, garbage="large", extra=1):
    """Sets padded to the longest one plus ``extra`` rows of garbage, and the mask."""
    n_max = max(len(s) for s in sets) + extra
    X = _fill((len(sets), n_max, sets[0].shape[1]), garbage)
    mask = torch.zeros(len(sets), n_max, dtype=torch.bool)
    for i, s in enumerate(sets):
        X[i, : len(s)] = s
        mask[i, : len(s)] = True
    return X, mask


def _weights(shape, seed):
    return torch.randn(shape, generator=_gen(seed), dtype=DT)


def _perturb(module, seed=3, scale=0.2):
    """Move every parameter off its initial value (unit scales, zero shifts, zero size weights),
    so that no gradient is checked at a special point."""
    g = _gen(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return module


def _real_rows(out, mask):
    """Per-element outputs with the padded rows set to 0 (a select: garbage there stays out)."""
    return torch.where(mask.unsqueeze(-1), out, torch.zeros((), dtype=out.dtype))


def _gradcheck_module(module, X, mask, select=None, fast_mode=False):
    """``gradcheck`` with respect to the inputs and every parameter of ``module``."""
    names = [n for n, _ in module.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for _, p in module.named_parameters()]

    def f(x, *ps):
        out = functional_call(module, dict(zip(names, ps)), (x, mask))
        return out if select is None else select(out)

    x = X.detach().clone().requires_grad_(True)
    assert gradcheck(f, (x, *params), fast_mode=fast_mode)


def _check_padding(fn, sets, garbage, params=(), per_element=False):
    """``fn(x, mask)`` of each set alone (no mask) against the padded batch: the outputs, the input
    gradients (zero on padded rows) and the parameter gradients of a random linear read-out of
    the real outputs. ``per_element``: outputs ``(B, m, k)`` whose real rows come first."""
    X, mask = _pack(sets, garbage)
    X.requires_grad_(True)
    out = fn(X, mask)
    loss = X.new_zeros(())
    alone_x, alone_p = [], [torch.zeros_like(p) for p in params]
    for i, s in enumerate(sets):
        xi = s[None].clone().requires_grad_(True)
        oi = fn(xi, None)[0]
        w = _weights(oi.shape, 100 + i)
        real = out[i, : oi.shape[0]] if per_element else out[i]
        torch.testing.assert_close(real, oi, **TOL)
        loss = loss + (real * w).sum()
        grads = torch.autograd.grad((oi * w).sum(), (xi, *params))
        alone_x.append(grads[0][0])
        alone_p = [a + g for a, g in zip(alone_p, grads[1:])]
    grads = torch.autograd.grad(loss, (X, *params))
    for i, s in enumerate(sets):
        torch.testing.assert_close(grads[0][i, : len(s)], alone_x[i], **TOL)
    assert torch.equal(grads[0][~mask], torch.zeros_like(grads[0][~mask]))
    assert grads[0][mask].abs().sum() > 0
    for got, expected in zip(grads[1:], alone_p):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, expected, **TOL)


def _perm_index(mask, seed=7):
    """A gather index that permutes the real rows of each set (a fixed non-identity permutation)
    and leaves the padded rows in place."""
    g = _gen(seed)
    idx = torch.arange(mask.shape[1]).repeat(mask.shape[0], 1)
    for i, n in enumerate(mask.sum(1).tolist()):
        perm = torch.randperm(n, generator=g)
        while n > 1 and torch.equal(perm, torch.arange(n)):
            perm = torch.randperm(n, generator=g)
        idx[i, :n] = perm
    return idx


def _check_permutation(fn, sets, equivariant):
    """``fn`` on a padded batch whose sets' real elements are permuted: the same outputs
    (invariant) or the permuted outputs (equivariant), and the permuted input gradients."""
    X, mask = _pack(sets)
    idx = _perm_index(mask)
    X = X.requires_grad_(True)
    Xp = X.detach().gather(1, idx.unsqueeze(-1).expand_as(X)).requires_grad_(True)
    out, outp = fn(X, mask), fn(Xp, mask)
    if equivariant:
        w = _real_rows(_weights(out.shape, 11), mask)
        wp = w.gather(1, idx.unsqueeze(-1).expand_as(w))
        for i, n in enumerate(mask.sum(1).tolist()):
            torch.testing.assert_close(outp[i, :n], out[i, idx[i, :n]], **TOL)
        loss, lossp = (_real_rows(out, mask) * w).sum(), (_real_rows(outp, mask) * wp).sum()
    else:
        torch.testing.assert_close(outp, out, **TOL)
        w = _weights(out.shape, 11)
        loss, lossp = (out * w).sum(), (outp * w).sum()
    g, = torch.autograd.grad(loss, X)
    gp, = torch.autograd.grad(lossp, Xp)
    torch.testing.assert_close(gp, g.gather(1, idx.unsqueeze(-1).expand_as(g)), **TOL)


# ----------------------------------------------------------------------------- masked pooling
POOLS = ("sum", "mean", "max", "scaled_mean")


@pytest.mark.parametrize("how", POOLS)
def test_masked_pool_gradcheck_on_padded_sets(how):
    """masked_pool passes gradcheck on a padded batch of three sizes, with the scale as input."""
    X, mask = _pack(_sets())
    X.requires_grad_(True)
    size = torch.tensor(2.5, dtype=DT, requires_grad=True)
    assert gradcheck(lambda x, s: masked_pool(x, mask, how, s), (X, size))


@pytest.mark.parametrize("how", POOLS)
def test_masked_pool_gradient_matches_its_closed_form(how):
    """masked_pool's input gradient is the closed form: 1, 1/n, size/n or one-hot at the max."""
    sets = _sets()
    X, mask = _pack(sets, "nan")
    X.requires_grad_(True)
    w = _weights((len(sets), 3), 5)
    g, = torch.autograd.grad((masked_pool(X, mask, how, 2.5) * w).sum(), X)
    expected = torch.zeros_like(X)
    for i, s in enumerate(sets):
        n = len(s)
        if how == "max":
            arg = s.argmax(0)
            expected[i, arg, torch.arange(3)] = w[i]
        else:
            expected[i, :n] = w[i] * {"sum": 1.0, "mean": 1.0 / n, "scaled_mean": 2.5 / n}[how]
    torch.testing.assert_close(g, expected, rtol=1e-14, atol=0)


@pytest.mark.parametrize("garbage", GARBAGE)
@pytest.mark.parametrize("how", POOLS)
def test_masked_pool_padding_invariance_with_gradients(how, garbage):
    """masked_pool of a padded set equals the set alone, outputs and input gradients."""
    _check_padding(lambda x, m: masked_pool(x, m, how, 2.5), _sets(), garbage)


@pytest.mark.parametrize("how", POOLS)
def test_masked_pool_permutation_invariance_with_gradients(how):
    """masked_pool is invariant to an order of the real elements; its gradient follows them."""
    _check_permutation(lambda x, m: masked_pool(x, m, how, 2.5), _sets(), equivariant=False)


def test_masked_pool_set_without_elements_has_zero_gradient():
    """A set without real elements pools to 0 with zero gradient under every pooling."""
    X, mask = _pack(_sets((3, 2)), "large")
    mask[1] = False
    X.requires_grad_(True)
    for how in POOLS:
        out = masked_pool(X, mask, how, 2.0)
        g, = torch.autograd.grad((out * _weights(out.shape, 2)).sum(), X)
        assert torch.equal(out[1], torch.zeros(3, dtype=DT)), how
        assert torch.equal(g[1], torch.zeros_like(g[1])), how
        assert g[0].abs().sum() > 0, how


# ----------------------------------------------------------------------------- pooled skip
def _pooled_linear():
    skip = _perturb(_seeded(lambda: PooledLinear(3, 2)).to(DT))
    skip.shift.copy_(torch.linspace(-0.5, 0.5, 6, dtype=DT))
    skip.scale.copy_(torch.linspace(0.5, 2.0, 6, dtype=DT))
    return skip


def test_pooled_linear_gradcheck_inputs_and_parameters():
    """PooledLinear passes gradcheck in its inputs, weight and bias on a padded batch."""
    X, mask = _pack(_sets())
    _gradcheck_module(_pooled_linear(), X, mask)


@pytest.mark.parametrize("garbage", GARBAGE)
def test_pooled_linear_padding_invariance_with_gradients(garbage):
    """PooledLinear of a padded set equals the set alone: outputs, input and parameter gradients."""
    skip = _pooled_linear()
    _check_padding(skip, _sets(), garbage, params=tuple(skip.parameters()))


def test_pooled_linear_permutation_invariance_with_gradients():
    """PooledLinear is invariant to the order of the real elements, gradients permuted along."""
    _check_permutation(_pooled_linear(), _sets(), equivariant=False)


# ----------------------------------------------------------------------------- Deep Sets
DEEP_SETS = {
    "plain-sum": dict(norm=None, residual=None, pooling="sum"),
    "layer-original-mean": dict(norm="layer", residual="original", pooling="mean"),
    "set-clean-max": dict(norm="set", residual="clean", pooling="max"),
    "set-original-scaled": dict(norm="set", residual="original", pooling="scaled_mean",
                                pool_size=3.0),
    "layer-clean-sized-skip": dict(norm="layer", residual="clean", pooling="sized_mean",
                                   pool_size=4.0, pooled_skip=True),
}


def _deep_sets(name):
    return _perturb(_seeded(lambda: DeepSets(3, 4, 2, n_layers=1, n_decoder_layers=1,
                                             **DEEP_SETS[name])).to(DT))


@pytest.mark.parametrize("name", DEEP_SETS)
def test_deep_sets_gradcheck_inputs_and_parameters(name):
    """DeepSets passes gradcheck in its inputs and every parameter on a padded batch."""
    X, mask = _pack(_sets())
    _gradcheck_module(_deep_sets(name), X, mask)


@pytest.mark.parametrize("garbage", GARBAGE)
@pytest.mark.parametrize("name", DEEP_SETS)
def test_deep_sets_padding_invariance_with_gradients(name, garbage):
    """DeepSets of a padded set equals the set alone: outputs, input and parameter gradients."""
    net = _deep_sets(name)
    _check_padding(net, _sets(), garbage, params=tuple(net.parameters()))


@pytest.mark.parametrize("name", DEEP_SETS)
def test_deep_sets_permutation_invariance_with_gradients(name):
    """DeepSets is invariant to the order of the real elements, gradients permuted along."""
    _check_permutation(_deep_sets(name), _sets(), equivariant=False)


ENCODERS = [(None, None), ("layer", "original"), ("set", "clean")]


def _encoder(norm, residual):
    return _perturb(_seeded(lambda: DeepSetsEncoder(3, 4, 1, norm=norm,
                                                    residual=residual)).to(DT))


@pytest.mark.parametrize("norm, residual", ENCODERS)
def test_deep_sets_encoder_gradcheck_inputs_and_parameters(norm, residual):
    """DeepSetsEncoder passes gradcheck (inputs, parameters) on the real rows of a padded batch."""
    X, mask = _pack(_sets())
    _gradcheck_module(_encoder(norm, residual), X, mask, select=lambda o: _real_rows(o, mask))


@pytest.mark.parametrize("garbage", GARBAGE)
@pytest.mark.parametrize("norm, residual", ENCODERS)
def test_deep_sets_encoder_padding_invariance_with_gradients(norm, residual, garbage):
    """DeepSetsEncoder's real rows and gradients of a padded set equal those of the set alone."""
    enc = _encoder(norm, residual)
    _check_padding(enc, _sets(), garbage, params=tuple(enc.parameters()), per_element=True)


@pytest.mark.parametrize("norm, residual", ENCODERS)
def test_deep_sets_encoder_permutation_equivariance_with_gradients(norm, residual):
    """DeepSetsEncoder permutes its outputs and input gradients with the real elements."""
    _check_permutation(_encoder(norm, residual), _sets(), equivariant=True)


BLOCKS = [(None, None), ("layer", "original"), ("set", "original"), ("set", "clean")]


def _block(norm, residual):
    return _perturb(_seeded(lambda: DeepSetsBlock(3, norm=norm, residual=residual)).to(DT))


@pytest.mark.parametrize("norm, residual", BLOCKS)
def test_deep_sets_block_gradcheck_and_equivariance(norm, residual):
    """DeepSetsBlock passes gradcheck on the real rows and is permutation-equivariant."""
    block = _block(norm, residual)
    X, mask = _pack(_sets())
    _gradcheck_module(block, X, mask, select=lambda o: _real_rows(o, mask))
    _check_permutation(block, _sets(), equivariant=True)


@pytest.mark.parametrize("garbage", GARBAGE)
@pytest.mark.parametrize("norm, residual", BLOCKS)
def test_deep_sets_block_padding_invariance_with_gradients(norm, residual, garbage):
    """DeepSetsBlock's real rows and gradients of a padded set equal alone's, NaN or inf padding
    included (it read the padded rows as they were before: NaN there made the weights' gradients
    NaN)."""
    block = _block(norm, residual)
    _check_padding(block, _sets(), garbage, params=tuple(block.parameters()), per_element=True)


# ----------------------------------------------------------------------------- set norm
def _set_norm_module():
    return _perturb(SetNorm(3).to(DT))


def test_set_norm_module_gradcheck_inputs_weight_and_bias():
    """SetNorm passes gradcheck in its inputs, weight and bias on the real rows of a padded batch."""
    X, mask = _pack(_sets())
    _gradcheck_module(_set_norm_module(), X, mask, select=lambda o: _real_rows(o, mask))


@pytest.mark.parametrize("garbage", GARBAGE)
def test_set_norm_padding_invariance_with_gradients(garbage):
    """SetNorm of a padded set equals the set alone: real rows, input and parameter gradients."""
    sn = _set_norm_module()
    _check_padding(sn, _sets(), garbage, params=(sn.weight, sn.bias), per_element=True)


def test_set_norm_permutation_equivariance_with_gradients():
    """SetNorm permutes its outputs and input gradients with the real elements."""
    _check_permutation(_set_norm_module(), _sets(), equivariant=True)


def test_set_norm_set_without_elements_stays_finite_with_zero_gradient():
    """set_norm of a batch holding a set without real elements is finite with zero gradient there."""
    X, mask = _pack(_sets((3, 2)), "inf")
    mask[1] = False
    X.requires_grad_(True)
    w = torch.tensor([0.5, 1.5, 2.0], dtype=DT, requires_grad=True)
    b = torch.tensor([0.1, -0.2, 0.3], dtype=DT, requires_grad=True)
    out = set_norm(X, mask, weight=w, bias=b)
    assert torch.isfinite(out).all()
    gx, gw, gb = torch.autograd.grad((out * _weights(out.shape, 4)).sum(), (X, w, b))
    assert torch.equal(gx[1], torch.zeros_like(gx[1]))
    assert torch.isfinite(gx).all() and torch.isfinite(gw).all() and torch.isfinite(gb).all()


# ----------------------------------------------------------------------------- Nystrom layer
NYSTROM = {
    "w1": dict(window=1),
    "w1-normalize": dict(window=1, normalize=True, keep_norm=True),
    "w3-level-shape": dict(window=3, kmer_coding="level_shape"),
    "w2-d2-plain-normalize": dict(window=2, dilation=2, kmer_coding="plain", normalize=True),
}
NYSTROM_SIZES = (4, 6, 2)  # the set of 2 is shorter than a 3-mer's span: one k-mer


def _nystrom(name):
    layer = _seeded(lambda: NystromLayer(2, 4, bandwidth=0.9, **NYSTROM[name])).to(DT)
    with torch.no_grad():
        n_std = layer.mean.shape[0]
        layer.mean.copy_(torch.linspace(-0.3, 0.3, n_std, dtype=DT))
        layer.scale.copy_(torch.linspace(0.7, 1.4, n_std, dtype=DT))
    return layer


@pytest.mark.parametrize("name", NYSTROM)
def test_nystrom_layer_gradcheck_inputs_and_anchors(name):
    """NystromLayer passes gradcheck in its inputs and anchors on a padded batch of k-mers."""
    layer = _nystrom(name)
    X, mask = _pack(_sets(NYSTROM_SIZES, d=2))
    _gradcheck_module(layer, X, mask, select=lambda o: o[0])


@pytest.mark.parametrize("garbage", GARBAGE)
@pytest.mark.parametrize("name", NYSTROM)
def test_nystrom_layer_padding_invariance_with_gradients(name, garbage):
    """NystromLayer of a padded set equals the set alone: real k-mers, input and anchor gradients."""
    layer = _nystrom(name)
    _check_padding(lambda x, m: layer(x, m)[0], _sets(NYSTROM_SIZES, d=2), garbage,
                   params=(layer.anchors,), per_element=True)


@pytest.mark.parametrize("name", ["w1", "w1-normalize"])
def test_nystrom_layer_permutation_equivariance_with_gradients(name):
    """NystromLayer on single elements permutes its outputs and gradients with the elements."""
    layer = _nystrom(name)
    _check_permutation(lambda x, m: layer(x, m)[0], _sets(NYSTROM_SIZES, d=2), equivariant=True)


@pytest.mark.parametrize("normalize", [False, True])
def test_nystrom_map_gradcheck_inputs_anchors_and_normalization(normalize):
    """nystrom_map passes gradcheck in its rows, anchors and normalization matrix."""
    g = _gen(8)
    x = torch.randn(2, 3, 2, generator=g, dtype=DT, requires_grad=True)
    w = torch.randn(4, 2, generator=g, dtype=DT, requires_grad=True)
    a = torch.randn(4, 4, generator=g, dtype=DT)
    a = (a + a.T).requires_grad_(True)
    assert gradcheck(lambda x_, w_, a_: nystrom_map(x_, w_, a_, 0.8, normalize=normalize,
                                                    keep_norm=True), (x, w, a))


def _naive_kmers(s, window, dilation):
    """The k-mers of one set by a loop: element ``min(i + j * dilation, n - 1)`` at step ``j``."""
    n = len(s)
    m = max(n - (window - 1) * dilation, 1)
    return torch.stack([torch.cat([s[min(i + j * dilation, n - 1)] for j in range(window)])
                        for i in range(m)])


@pytest.mark.parametrize("window, dilation", [(2, 1), (3, 2)])
def test_kmer_unfold_matches_a_loop_gradcheck_and_padding(window, dilation):
    """kmer_unfold equals a loop over each set, passes gradcheck and ignores padding."""
    sets = _sets((5, 7, 2), d=2)
    X, mask = _pack(sets, "large")
    xw, kmask = kmer_unfold(X, mask, window, dilation)
    for i, s in enumerate(sets):
        ref = _naive_kmers(s, window, dilation)
        assert int(kmask[i].sum()) == len(ref)
        torch.testing.assert_close(xw[i, : len(ref)], ref, rtol=0, atol=0)
    Xg = X.detach().clone().requires_grad_(True)
    assert gradcheck(lambda x: _real_rows(*kmer_unfold(x, mask, window, dilation)), (Xg,))
    _check_padding(lambda x, m: kmer_unfold(x, m, window, dilation)[0], sets, "nan",
                   per_element=True)


def test_kmer_level_shape_matches_its_formula_and_gradcheck():
    """kmer_level_shape is each k-mer's deviations from its mean then the mean, and passes gradcheck."""
    x = torch.randn(2, 4, 6, generator=_gen(9), dtype=DT, requires_grad=True)
    steps = x.detach().reshape(2, 4, 3, 2)
    level = steps.mean(2)
    ref = torch.cat([(steps - level[:, :, None]).reshape(2, 4, 6), level], -1)
    torch.testing.assert_close(kmer_level_shape(x, 3), ref, rtol=1e-15, atol=1e-15)
    assert gradcheck(lambda x_: kmer_level_shape(x_, 3), (x,))


# ----------------------------------------------------------------------------- dilated kernels
def _channels(C, seed=10):
    """0/1 channel choices of the 84 kernels, at least one channel each."""
    ch = (torch.rand(84, C, generator=_gen(seed)) < 0.5).to(DT)
    ch[:, 0] = torch.where(ch.sum(1) == 0, 1.0, ch[:, 0])
    return ch


DILATED = [(1, 1, False), (2, 1, False), (1, 2, True), (2, 2, True)]  # dilation, C, channels


def _responses(dilation, channels):
    """kernel_responses as ``(B, n, 84)``, per element."""
    return lambda x, m: kernel_responses(x, m, dilation, channels).permute(1, 2, 0)


@pytest.mark.parametrize("dilation, C, with_channels", DILATED)
def test_kernel_responses_gradcheck_on_padded_series(dilation, C, with_channels):
    """kernel_responses passes gradcheck on the real points of a padded batch of series."""
    fn = _responses(dilation, _channels(C) if with_channels else None)
    X, mask = _pack(_sets((5, 9, 3), d=C))
    X.requires_grad_(True)
    assert gradcheck(lambda x: _real_rows(fn(x, mask), mask), (X,), fast_mode=True)


@pytest.mark.parametrize("garbage", GARBAGE)
@pytest.mark.parametrize("dilation, C, with_channels", DILATED)
def test_kernel_responses_padding_invariance_with_gradients(dilation, C, with_channels, garbage):
    """kernel_responses of a padded series equal the series alone: real points and gradients."""
    fn = _responses(dilation, _channels(C) if with_channels else None)
    _check_padding(fn, _sets((5, 9, 3), d=C), garbage, per_element=True)


# ----------------------------------------------------------------------------- spectral
def _affinities(sizes=SIZES, seed=12):
    """Symmetric positive affinities, one matrix per size."""
    out = []
    for k, n in enumerate(sizes):
        a = torch.rand(n, n, generator=_gen(seed + k), dtype=DT) + 0.1
        out.append(a + a.T)
    return out


def _pack_affinities(mats, garbage="large", extra=1):
    n_max = max(len(a) for a in mats) + extra
    A = _fill((len(mats), n_max, n_max), garbage)
    mask = torch.zeros(len(mats), n_max, dtype=torch.bool)
    for i, a in enumerate(mats):
        A[i, : len(a), : len(a)] = a
        mask[i, : len(a)] = True
    return A, mask


def test_normalized_laplacian_matches_its_formula_and_gradcheck():
    """normalized_laplacian is I - D^-1/2 A D^-1/2 on the real block and passes gradcheck."""
    mats = _affinities()
    A, mask = _pack_affinities(mats)
    L = normalized_laplacian(A, mask)
    for i, a in enumerate(mats):
        n = len(a)
        d = a.sum(1).rsqrt()
        torch.testing.assert_close(L[i, :n, :n], torch.eye(n, dtype=DT) - d[:, None] * a * d,
                                   rtol=1e-13, atol=1e-14)
        pad = L[i, n:, n:]  # distinct sentinels 3 + j / n_max on the padded diagonal
        n_max = L.shape[-1]
        sentinels = 3.0 + torch.arange(n, n_max, dtype=DT) / n_max
        torch.testing.assert_close(pad, torch.diag(sentinels), rtol=0, atol=0)
        assert torch.equal(L[i, :n, n:], torch.zeros_like(L[i, :n, n:]))
    A.requires_grad_(True)
    assert gradcheck(lambda a: normalized_laplacian(a, mask), (A,))


@pytest.mark.parametrize("garbage", GARBAGE)
def test_normalized_laplacian_padding_invariance_with_gradients(garbage):
    """normalized_laplacian of a padded affinity equals it alone; padded entries get no gradient."""
    mats = _affinities()
    A, mask = _pack_affinities(mats, garbage)
    A.requires_grad_(True)
    L = normalized_laplacian(A, mask)
    pair = mask[:, :, None] & mask[:, None, :]
    W = torch.where(pair, _weights(L.shape, 13), torch.zeros((), dtype=DT))
    g, = torch.autograd.grad((torch.where(pair, L, torch.zeros((), dtype=DT)) * W).sum(), A)
    for i, a in enumerate(mats):
        n = len(a)
        ai = a[None].clone().requires_grad_(True)
        li = normalized_laplacian(ai)
        torch.testing.assert_close(L[i, :n, :n], li[0], **TOL)
        gi, = torch.autograd.grad((li[0] * W[i, :n, :n]).sum(), ai)
        torch.testing.assert_close(g[i, :n, :n], gi[0], **TOL)
    assert torch.equal(g[~pair], torch.zeros_like(g[~pair]))


def test_normalized_laplacian_permutation_equivariance():
    """normalized_laplacian of P A P^T is P L P^T, and the gradient permutes the same way."""
    a = _affinities((5,))[0].requires_grad_(True)
    perm = torch.tensor([3, 0, 4, 1, 2])
    ap = a.detach()[perm][:, perm].requires_grad_(True)
    L, Lp = normalized_laplacian(a[None])[0], normalized_laplacian(ap[None])[0]
    torch.testing.assert_close(Lp, L[perm][:, perm], **TOL)
    W = _weights((5, 5), 14)
    g, = torch.autograd.grad((L * W).sum(), a)
    gp, = torch.autograd.grad((Lp * W[perm][:, perm]).sum(), ap)
    torch.testing.assert_close(gp, g[perm][:, perm], **TOL)


def _rbf(z):
    """Gaussian affinities of points ``z (B, n, p)``, from the differences (smooth everywhere)."""
    return torch.exp(-((z[:, :, None] - z[:, None, :]) ** 2).sum(-1))


def _padded_rbf(z, mask, garbage="large"):
    """:func:`_rbf` of the real points (padded points zeroed by a select first, so that NaN there
    cannot reach the gradient through the differences), garbage in the padded rows and columns."""
    if mask is None:
        return _rbf(z)
    z = torch.where(mask.unsqueeze(-1), z, torch.zeros((), dtype=z.dtype))
    pair = mask[:, :, None] & mask[:, None, :]
    return torch.where(pair, _rbf(z), _fill((z.shape[0], z.shape[1], z.shape[1]), garbage))


def _eigenvalues(z, mask, garbage="large"):
    """The real eigenvalues of each padded set's Laplacian, padded ones set to 0."""
    w = laplacian_eigh(_padded_rbf(z, mask, garbage), mask, eigenvectors=False)
    if mask is None:
        return w
    real = torch.arange(w.shape[1])[None, :] < mask.sum(1, keepdim=True)
    return torch.where(real, w, torch.zeros((), dtype=w.dtype))


def test_laplacian_eigenvalues_gradcheck_through_the_affinity():
    """laplacian_eigh's eigenvalues pass gradcheck in the points of an RBF affinity, padded."""
    X, mask = _pack(_sets((3, 5, 2), d=2, seed=15))
    X.requires_grad_(True)
    assert gradcheck(lambda x: _eigenvalues(x, mask), (X,))


@pytest.mark.parametrize("garbage", GARBAGE)
def test_laplacian_eigenvalues_padding_invariance_with_gradients(garbage):
    """laplacian_eigh's eigenvalues and their gradients of a padded set equal the set alone's."""
    _check_padding(lambda z, m: _eigenvalues(z, m, garbage), _sets((3, 5, 2), d=2, seed=15), garbage,
                   per_element=True)


def test_laplacian_eigenvalues_permutation_invariance_with_gradients():
    """laplacian_eigh's eigenvalues are invariant to the order of the nodes, gradients permuted."""
    _check_permutation(_eigenvalues, _sets((3, 5, 2), d=2, seed=15), equivariant=False)


def test_spectral_embedding_gradcheck_padding_and_row_permutation():
    """spectral_embedding passes gradcheck, ignores padded rows and columns, permutes with rows."""
    g = _gen(16)
    sizes, k = (3, 5, 2), torch.tensor([2, 3, 1])
    n_max = max(sizes) + 1
    V = 1e6 * torch.randn(3, n_max, n_max, generator=g, dtype=DT)
    mask = torch.zeros(3, n_max, dtype=torch.bool)
    alone = [torch.randn(n, n, generator=g, dtype=DT) for n in sizes]
    for i, v in enumerate(alone):
        V[i, : len(v), : len(v)] = v
        mask[i, : len(v)] = True
    V.requires_grad_(True)
    assert gradcheck(lambda v: spectral_embedding(v, mask, k), (V,))
    E = spectral_embedding(V, mask, k)
    W = _weights(E.shape, 17)
    gV, = torch.autograd.grad((E * W).sum(), V)
    for i, v in enumerate(alone):
        n, ki = len(v), int(k[i])
        vi = v[None].clone().requires_grad_(True)
        ei = spectral_embedding(vi, None, k[i: i + 1])
        torch.testing.assert_close(E[i, :n, :ki], ei[0], **TOL)
        assert torch.equal(E[i, n:], torch.zeros_like(E[i, n:]))
        assert torch.equal(E[i, :, ki:], torch.zeros_like(E[i, :, ki:]))
        gi, = torch.autograd.grad((ei[0] * W[i, :n, :ki]).sum(), vi)
        torch.testing.assert_close(gV[i, :n, :n], gi[0], **TOL)
        assert torch.equal(gV[i, n:], torch.zeros_like(gV[i, n:]))
        assert torch.equal(gV[i, :, ki:], torch.zeros_like(gV[i, :, ki:]))
        perm = torch.randperm(n, generator=g)
        ep = spectral_embedding(v[perm][None], None, k[i: i + 1])
        torch.testing.assert_close(ep[0], ei[0, perm].detach(), **TOL)


def test_laplacian_eigenvectors_gradient_padding_invariance():
    """Gradients through laplacian_eigh's eigenvectors and spectral_embedding ignore padding (NaN
    before the padded nodes' eigenvalues were distinct: eigh's backward divided by a zero gap)."""
    sets = _sets((4, 7), d=2, seed=18)
    X, mask = _pack(sets, "large", extra=2)
    X.requires_grad_(True)
    k = torch.tensor([2, 3])

    def read(x, m, kk):  # squared entries: free of the eigenvectors' signs
        w, V = laplacian_eigh(_padded_rbf(x, m), m)
        return spectral_embedding(V, m, kk).square()

    E = read(X, mask, k)
    Wt = _weights(E.shape, 19)
    g, = torch.autograd.grad((_real_rows(E, mask) * Wt).sum(), X)
    for i, s in enumerate(sets):
        n, ki = len(s), int(k[i])
        xi = s[None].clone().requires_grad_(True)
        ei = read(xi, None, k[i: i + 1])
        torch.testing.assert_close(E[i, :n, :ki], ei[0], rtol=1e-8, atol=1e-10)
        gi, = torch.autograd.grad((ei[0] * Wt[i, :n, :ki]).sum(), xi)
        assert torch.isfinite(g[i]).all()
        torch.testing.assert_close(g[i, :n], gi[0], rtol=1e-7, atol=1e-9)


# ----------------------------------------------------------------------------- masks
@pytest.mark.parametrize("form", ["int", "float", "list"])
def test_masks_of_any_form_give_the_bool_masks_gradients(form):
    """A 0/1 int, float or list mask gives the bool mask's outputs and gradients; none reach it."""
    net = _deep_sets("set-clean-max")
    X, mask = _pack(_sets(), "nan")
    other = {"int": mask.long(), "float": mask.to(DT).requires_grad_(True),
             "list": mask.long().tolist()}[form]
    results = []
    for m in (mask, other):
        net.zero_grad()
        x = X.clone().requires_grad_(True)
        out = net(x, m)
        out.sum().backward()
        results.append((out.detach(), x.grad, [p.grad.clone() for p in net.parameters()]))
    (o0, g0, p0), (o1, g1, p1) = results
    assert torch.equal(o0, o1) and torch.equal(g0, g1)
    assert all(torch.equal(a, b) for a, b in zip(p0, p1))
    if form == "float":
        assert other.grad is None
