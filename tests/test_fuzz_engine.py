"""Fuzzing the engine with hypothesis: the :mod:`skset.nn` layers and :func:`skset.ot.sinkhorn`.

Two properties (issue 27):

* **Padding holds anything.** Every layer, block and masked function of :mod:`skset.nn` gets a
  padded batch (1-4 sets of 1-12 real elements, 1-8 features, real values from 1e-30 to 1e30,
  float32 or float64) whose padding (``mask`` False) is filled with garbage (NaN, +-inf, 1e30,
  the dtype's largest value, random huge values); its outputs on the real sets and the gradients
  of its parameters must equal those of the same batch with zero padding (the same computation
  on a clean copy; bitwise in practice, checked with ``torch.testing.assert_close``), and the
  input must be left untouched.
* **Sinkhorn on any input.** :func:`skset.ot.sinkhorn` gets torch or numpy similarities of any
  dtype (integer, boolean, float16/32/64, complex, strings), masks of any kind (numpy, integer,
  wrong shape, rows all False), ``n_iter`` and ``epsilon`` of any value, element weights with
  zeros, extreme ratios, NaN, negative values, and garbage in the padding. Either the plan equals
  the plan of the clean float64 copy (weights rescaled by any factor give the same plan) or a
  ``ValueError``/``TypeError`` names the argument.

The example database is off and generation is derandomised (reproducible); ``SKSET_FUZZ_EXAMPLES``
scales the number of examples (and ``SKSET_FUZZ_RANDOM=1`` randomises them), see
``docs/input_contract.rst``.
"""

import math
import os

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skset import nn as snn
from skset.ot import sinkhorn

N_EXAMPLES = int(os.environ.get("SKSET_FUZZ_EXAMPLES", 2000))
FUZZ = settings(
    deadline=None,
    database=None,
    derandomize=not os.environ.get("SKSET_FUZZ_RANDOM"),
    suppress_health_check=list(HealthCheck),
)


def examples(fraction: float) -> settings:
    return settings(FUZZ, max_examples=max(int(N_EXAMPLES * fraction), 1))


# ------------------------------------------------------------------------------ padding garbage
def _attn(d):  # attention blocks need a width divisible by the number of heads
    return 2 * d


def _pair_mask(mask):
    return mask[:, :, None] & mask[:, None, :]


# name -> (builder(d), how to call it, which outputs are real)
#   call(module, x, mask, weights) -> tensor; real(out, mask) -> the entries that must not move
def _per_element(out, mask):
    return out[mask]


def _pooled(out, mask):
    return out


def _pairs(out, mask):
    return out[_pair_mask(mask)]


def _dilated_kernels(d):
    """Two dilations, three thresholds per kernel; with several channels, a random subset each
    (one channel: the width given as ``n_features``, as a fitted one-channel map gives it)."""
    thresholds = torch.randn(2, 84, 3)
    channels = None if d == 1 else (torch.rand(2, 84, d) < 0.5).float()
    return snn.DilatedKernelPPV([1, 2], thresholds, channels, n_features=1 if d == 1 else None)


LAYERS = {
    "OTKLayer": (lambda d: snn.OTKLayer(d, 3), "plain", _pooled),
    "OTKLayer-positions": (lambda d: snn.OTKLayer(d, 2, 2, position_sigma=0.5,
                                                  position_mode="similarity"), "plain", _pooled),
    "OTKLayer-weights": (lambda d: snn.OTKLayer(d, 3), "weights", _pooled),
    "OTKLayer-unbalanced-log": (lambda d: snn.OTKLayer(d, 2, 2, reg_m=1.0, method="log"),
                                "weights", _pooled),
    "OTKLayer-exp-tol": (lambda d: snn.OTKLayer(d, 3, method="exp", sinkhorn_tol=1e-3),
                         "plain", _pooled),
    # the sets read less an offset, a feature of ones carrying its share (positions in the plan)
    "OTKLayer-input_offset": (lambda d: snn.OTKLayer(d, 2, 2, position_sigma=0.5,
                                                     input_offset=torch.linspace(-2.0, 3.0, d)),
                              "weights", _pooled),
    "NystromLayer": (lambda d: snn.NystromLayer(d, 4), "nystrom", None),
    "NystromLayer-kmer-normalize": (lambda d: snn.NystromLayer(d, 3, window=2, normalize=True,
                                                               keep_norm=True), "nystrom", None),
    "NystromLayer-dilated": (lambda d: snn.NystromLayer(d, 3, window=3, dilation=2), "nystrom",
                             None),
    "MultiheadAttention": (lambda d: snn.MultiheadAttention(_attn(d), 2), "mha", _per_element),
    "MAB": (lambda d: snn.MAB(_attn(d), 2), "mab", _per_element),
    "SAB": (lambda d: snn.SAB(_attn(d), 2), "wide", _per_element),
    "SAB-set-clean": (lambda d: snn.SAB(_attn(d), 2, norm="set", residual="clean"), "wide",
                      _per_element),
    "ISAB": (lambda d: snn.ISAB(_attn(d), 2, 3), "wide", _per_element),
    "ISAB-set-clean": (lambda d: snn.ISAB(_attn(d), 2, 2, norm="set", residual="clean"), "wide",
                       _per_element),
    "PMA": (lambda d: snn.PMA(_attn(d), 2, 2), "wide", _pooled),
    "PMA-layer-clean": (lambda d: snn.PMA(_attn(d), 2, norm="layer", residual="clean"), "wide",
                        _pooled),
    "SetTransformer": (lambda d: snn.SetTransformer(d, 8, 2, n_layers=1, n_heads=2), "plain",
                       _pooled),
    # dropout in training, the masks drawn alike at every call (so that calls compare)
    "SetTransformer-dropout": (lambda d: _SeededDropout(snn.SetTransformer(
        d, 8, 2, n_layers=1, n_heads=2, n_inducing=2, dropout=0.3)), "plain", _pooled),
    # the masks from a generator of the module's (set_dropout_generator), reseeded at each call
    "SetTransformer-dropout-generator": (lambda d: _GeneratorDropout(snn.SetTransformer(
        d, 8, 2, n_layers=1, n_heads=2, dropout=0.3)), "plain", _pooled),
    "SetTransformer++": (lambda d: snn.SetTransformer(d, 8, 3, n_layers=2, n_heads=2,
                                                      n_inducing=2, norm="set", residual="clean",
                                                      decoder="sab"), "plain", _pooled),
    "DeepSets-max": (lambda d: snn.DeepSets(d, 8, 2, pooling="max"), "plain", _pooled),
    "DeepSets-skip": (lambda d: snn.DeepSets(d, 8, 2, pooled_skip=True), "plain", _pooled),
    "DeepSets-scaled_mean": (lambda d: snn.DeepSets(d, 8, 2, pooling="scaled_mean", pool_size=4.5),
                             "plain", _pooled),
    # the set's size read by the decoder (its weights non-zero, so that the size counts)
    "DeepSets-sized_mean": (lambda d: _sized(snn.DeepSets(d, 8, 2, pooling="sized_mean",
                                                          pool_size=4.5)), "plain", _pooled),
    "PooledLinear": (lambda d: snn.PooledLinear(d, 3), "plain", _pooled),
    "DilatedKernelPPV": (_dilated_kernels, "plain", _pooled),
    "DeepSets++-mean": (lambda d: snn.DeepSets(d, 8, 1, norm="set", residual="clean",
                                               pooling="mean"), "plain", _pooled),
    "DeepSetsEncoder-layer": (lambda d: snn.DeepSetsEncoder(d, 8, 2, norm="layer",
                                                            residual="original"), "plain",
                              _per_element),
    "DeepSetsBlock": (lambda d: snn.DeepSetsBlock(d), "plain", _per_element),
    "DeepSetsBlock-set-clean": (lambda d: snn.DeepSetsBlock(d, norm="set", residual="clean"),
                                "plain", _per_element),
    "SetNorm": (lambda d: snn.SetNorm(d), "plain", _per_element),
    "masked_pool-sum": (lambda d: "sum", "pool", _pooled),
    "masked_pool-max": (lambda d: "max", "pool", _pooled),
    "masked_pool-scaled_mean": (lambda d: ("scaled_mean", 4.5), "pool", _pooled),
    "ABCKernel": (lambda d: snn.ABCKernel(d, dim=8, n_heads=2), "plain", _pairs),
    "ABCKernel-knn-additive": (lambda d: _mixed(snn.ABCKernel(d, dim=8, n_heads=2,
                                                              input_similarity="knn",
                                                              n_neighbors=2,
                                                              compatibility="additive")),
                               "plain", _pairs),
    "ABCKernel-rbf-set": (lambda d: _mixed(snn.ABCKernel(d, dim=8, n_heads=2, norm="set",
                                                         residual="clean",
                                                         input_similarity="rbf")),
                          "plain", _pairs),
    "ABCKernel-cosine": (lambda d: _mixed(snn.ABCKernel(d, dim=8, n_heads=2,
                                                        input_similarity="cosine")),
                         "plain", _pairs),
    # these document their padded entries (0; the sentinel 3 on the diagonal): all must match
    "abc_affinity": (lambda d: None, "square", _pooled),
    "normalized_laplacian": (lambda d: None, "square", _pooled),
}
_LAYER_CACHE = {}


class _SeededDropout(torch.nn.Module):
    """``net`` in training mode, its dropout masks drawn from one seed at every call."""

    def __init__(self, net):
        super().__init__()
        self.net = net.train()

    def forward(self, x, mask):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            return self.net(x, mask)


class _GeneratorDropout(torch.nn.Module):
    """``net`` in training mode, its dropout masks drawn from its own generator, seeded alike at
    every call (torch's global generator left alone)."""

    def __init__(self, net):
        super().__init__()
        self.generator = torch.Generator()
        self.net = net.train().set_dropout_generator(self.generator)

    def forward(self, x, mask):
        self.generator.manual_seed(0)
        return self.net(x, mask)


def _mixed(net):
    with torch.no_grad():
        net.mix.copy_(torch.tensor([0.5, 0.5]))  # the prior and the learned part both count
    return net


def _sized(net):
    with torch.no_grad():
        net.size_weight.copy_(torch.linspace(-1.0, 1.0, len(net.size_weight)))
    return net


def _layer(name, d, dtype):
    key = (name, d, dtype)
    if key not in _LAYER_CACHE:
        torch.manual_seed(d)
        mod = LAYERS[name][0](d)
        if isinstance(mod, torch.nn.Module):
            mod = mod.to(dtype)
        _LAYER_CACHE[key] = mod
    return _LAYER_CACHE[key]


def _run(name, mod, kind, x, mask, weights):
    """``(real outputs, parameters)`` of one call."""
    if kind == "plain":
        out = mod(x, mask)
    elif kind == "weights":
        out = mod(x, mask, weights)
    elif kind == "nystrom":
        out, new_mask = mod(x, mask)
        return out[new_mask], list(mod.parameters())
    elif kind == "mha":
        out = mod(x, x, x, mask, mask)
    elif kind == "mab":  # queries: the first half of the batch's rows, keys: all of them
        out = mod(x, x.flip(0), mask, mask.flip(0))
    elif kind == "wide":
        out = mod(x, mask)
    elif kind == "pool":
        out = snn.masked_pool(x, mask, *((mod,) if isinstance(mod, str) else mod))
    elif kind == "square":
        fn = snn.abc_affinity if name == "abc_affinity" else snn.normalized_laplacian
        out = fn(x, mask)
    else:  # pragma: no cover
        raise AssertionError(kind)
    params = list(mod.parameters()) if isinstance(mod, torch.nn.Module) else []
    return LAYERS[name][2](out, mask), params


GARBAGE = ["nan", "inf", "-inf", "1e30", "max", "-max", "huge-random"]


@pytest.mark.filterwarnings("ignore")
@examples(0.15)
@given(name=st.sampled_from(sorted(LAYERS)), d=st.sampled_from([1, 2, 3, 5, 8]),
       lengths=st.lists(st.integers(1, 12), min_size=1, max_size=4),
       extra=st.integers(0, 5), log_scale=st.sampled_from([-30, -3, 0, 0, 0, 3, 30]),
       dtype=st.sampled_from([torch.float32, torch.float64]), fill=st.sampled_from(GARBAGE),
       seed=st.integers(0, 2**31 - 1))
def test_fuzz_nn_padding_holds_anything(name, d, lengths, extra, log_scale, dtype, fill, seed):
    """Garbage in the padding changes neither the real outputs nor the parameters' gradients."""
    mod = _layer(name, d, dtype)
    kind = LAYERS[name][1]
    g = torch.Generator().manual_seed(seed)
    n_max = max(lengths) + extra
    B = len(lengths)
    width = _attn(d) if kind in ("mha", "mab", "wide") else n_max if kind == "square" else d
    mask = torch.arange(n_max)[None, :] < torch.tensor(lengths)[:, None]
    x = torch.randn(B, n_max, width, generator=g, dtype=torch.float64) * 10.0 ** log_scale
    if kind == "square":  # a symmetric matrix of logits / an affinity in [0, 1]
        x = x / 10.0 ** log_scale
        x = 0.5 * (x + x.transpose(1, 2))
        if name == "normalized_laplacian":
            x = torch.sigmoid(x)
        pad = ~_pair_mask(mask)
    else:
        pad = ~mask.unsqueeze(-1).expand_as(x)
    x = x.to(dtype).masked_fill(pad, 0.0)
    weights = torch.rand(B, n_max, generator=g, dtype=dtype) + 0.1
    big = torch.finfo(dtype).max
    garbage = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "1e30": 1e30, "max": big,
               "-max": -big}.get(fill)
    if garbage is None:
        noise = torch.randn(x.shape, generator=g, dtype=torch.float64) * 1e30
        bad = torch.where(pad, noise.clamp(-big, big).to(dtype), x)
    else:
        bad = x.masked_fill(pad, garbage)
    bad_weights = weights.masked_fill(~mask, math.nan if fill == "nan" else -1e30)
    bad_copy = bad.clone()
    # (k-mers of a batch shorter than the window: one per set, its last element repeated)
    clean, params = _run(name, mod, kind, x, mask, weights)
    got, _ = _run(name, mod, kind, bad, mask, bad_weights)
    assert torch.equal(bad.isnan(), bad_copy.isnan())
    assert torch.equal(bad.nan_to_num(), bad_copy.nan_to_num()), "the input was modified"
    torch.testing.assert_close(got, clean, equal_nan=True,
                               msg=lambda m: f"{name}: padding changed the outputs\n{m}")
    if not params or not torch.isfinite(clean).all():
        return
    ref = torch.autograd.grad(clean.sum(), params, allow_unused=True)
    grads = torch.autograd.grad(got.sum(), params, allow_unused=True)
    for gr, r in zip(grads, ref, strict=True):
        if r is not None and torch.isfinite(r).all():
            torch.testing.assert_close(gr, r, msg=lambda m: f"{name}: padding changed the "
                                       f"gradients\n{m}")


@pytest.mark.filterwarnings("ignore")
@examples(0.05)
@given(name=st.sampled_from(["MultiheadAttention", "MAB", "OTKLayer", "OTKLayer-weights",
                             "DeepSetsBlock", "DeepSetsBlock-set-clean"]),
       d=st.sampled_from([1, 2, 3, 5, 8]), lengths=st.lists(st.integers(1, 12), min_size=1,
                                                            max_size=4),
       extra=st.integers(0, 5), scale=st.sampled_from([1e-3, 1.0, 1e3]),
       dtype=st.sampled_from([torch.float32, torch.float64]), seed=st.integers(0, 2**31 - 1))
def test_fuzz_inner_calls_skip_only_the_zeroing(name, d, lengths, extra, scale, dtype, seed):
    """The inner calls' flags: ``padding_finite=True`` (attention, Deep Sets blocks) on finite
    padding of moderate size and ``padding_zero=True`` (OTK layer) on zero padding give the
    outputs and parameter gradients of the call that zeroes the padding itself; the input is
    left untouched."""
    mod = _layer(name, d, dtype)
    kind = LAYERS[name][1]
    g = torch.Generator().manual_seed(seed)
    n_max = max(lengths) + extra
    width = _attn(d) if kind in ("mha", "mab") else d
    mask = torch.arange(n_max)[None, :] < torch.tensor(lengths)[:, None]
    pad = ~mask.unsqueeze(-1)
    x = torch.randn(len(lengths), n_max, width, generator=g, dtype=torch.float64).to(dtype)
    weights = torch.rand(len(lengths), n_max, generator=g, dtype=dtype) + 0.1
    block = name.startswith("DeepSetsBlock")
    if kind in ("mha", "mab") or block:  # finite garbage of moderate size in the padding
        x = torch.where(pad, scale * torch.randn(x.shape, generator=g, dtype=dtype), x)
        flag = {"padding_finite": True}
    else:
        x = x.masked_fill(pad, 0.0)
        flag = {"padding_zero": True}
    copy = x.clone()

    def run(**kw):
        if kind == "mha":
            out = mod(x, x, x, mask, mask, **kw)[mask]
        elif kind == "mab":
            out = mod(x, x.flip(0), mask, mask.flip(0), **kw)[mask]
        elif block:
            out = mod(x, mask, **kw)[mask]
        else:
            out = mod(x, mask, weights if kind == "weights" else None, **kw)
        return out, torch.autograd.grad(out.sum(), list(mod.parameters()))

    ref, ref_grads = run()
    got, grads = run(**flag)
    assert torch.equal(x, copy), "the input was modified"
    torch.testing.assert_close(got, ref, msg=lambda m: f"{name}: {flag} moved the outputs\n{m}")
    for a, b in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b, msg=lambda m: f"{name}: {flag} moved the gradients\n{m}")


def test_every_nn_module_is_fuzzed():
    """Every public ``nn.Module`` of :mod:`skset.nn` is in ``LAYERS`` (or said why not)."""
    # AttentionRecord is a dict of recorded weights, not a layer; DeepSetsBlock only sees
    # already-zeroed rows inside DeepSetsEncoder (it takes no input padding of its own)
    not_layers = {"AttentionRecord", "DeepSetsBlock"}
    modules = {n for n in snn.__all__ if isinstance(getattr(snn, n), type)
               and issubclass(getattr(snn, n), torch.nn.Module)}
    fuzzed = {name.split("-")[0].rstrip("+") for name in LAYERS}
    assert modules - not_layers <= fuzzed, sorted(modules - not_layers - fuzzed)


# ------------------------------------------------------------------------------------- sinkhorn
def _sim_input(draw, K):
    """The similarity ``K`` (float64 tensor) in a drawn container and dtype, and its clean float
    version (``None`` when the input is invalid: the expected error's keyword instead)."""
    form = draw(st.sampled_from(["torch"] * 6 + ["numpy"] * 3 + ["list", "complex", "string",
                                                             "2d", "4d"]))
    dtype = draw(st.sampled_from(["float64", "float32", "float16", "int64", "int8", "bool"]))
    if form == "complex":
        return K.numpy().astype(np.complex64), None, "similarity"
    if form == "string":
        return "not a tensor", None, "similarity"
    if form == "2d":
        return K[0], None, "similarity"
    if form == "4d":
        return K[None], None, "similarity"
    arr = K.numpy()
    if dtype in ("int64", "int8"):
        arr = np.clip(np.round(arr), -100, 100).astype(dtype)
    elif dtype == "bool":
        arr = arr > 0
    else:
        arr = arr.astype(dtype)
    clean = torch.as_tensor(arr.astype(np.float64))
    if form == "torch":
        obj = torch.as_tensor(arr)
    elif form == "numpy":
        obj = arr
    else:
        obj = arr.tolist()
    return obj, clean, None


@st.composite
def sinkhorn_inputs(draw):
    B = draw(st.integers(1, 4))
    n = draw(st.integers(1, 20))
    p = draw(st.integers(1, 8))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    K = torch.randn(B, n, p, generator=g, dtype=torch.float64) * 10.0 ** draw(
        st.sampled_from([-3, 0, 1]))
    lengths = torch.randint(1, n + 1, (B,), generator=g)
    mask = torch.arange(n)[None, :] < lengths[:, None]
    sim, clean, error = _sim_input(draw, K)
    errors = [] if error is None else [error]  # every problem of the input (any may be named)
    kw = {}
    mask_form = draw(st.sampled_from(["torch"] * 4 + ["numpy", "int", "none", "empty-row",
                                                       "wrong-shape"]))
    if mask_form == "none":
        mask_arg, mask = None, torch.ones(B, n, dtype=torch.bool)
    elif mask_form == "numpy":
        mask_arg = mask.numpy()
    elif mask_form == "int":
        mask_arg = mask.to(torch.int64)
    elif mask_form == "empty-row":
        mask = mask.clone()
        mask[draw(st.integers(0, B - 1))] = False
        mask_arg = mask
        errors.append("no real element")
    elif mask_form == "wrong-shape":
        mask_arg = mask[:, :-1] if n > 1 else mask[:, None]
        errors.append("mask")
    else:
        mask_arg = mask
    n_iter = draw(st.sampled_from([1, 5, 10, np.int64(7)] * 3 + [0, -3, 2.5, True, "10", None]))
    if not (isinstance(n_iter, (int, np.integer)) and not isinstance(n_iter, bool)
            and n_iter >= 1):
        errors.append("n_iter")
    kw["n_iter"] = n_iter
    eps = draw(st.sampled_from([0.05, 0.5, 1.0, 10.0] * 3 + [0.0, -1.0, math.nan, math.inf]))
    if not (eps > 0 and math.isfinite(eps)):
        errors.append("epsilon")
    kw["epsilon"] = eps
    w_form = draw(st.sampled_from(["none", "uniform-ish", "zeros", "extreme"] * 3
                                  + ["nan", "negative", "all-zero-set", "wrong-shape"]))
    w = None
    if w_form != "none":
        w = torch.rand(B, n, generator=g, dtype=torch.float64) + 0.05
        if w_form == "zeros":  # some real elements weigh nothing (never all of a set's)
            w = torch.where(torch.rand(B, n, generator=g) < 0.5, 0.0, w)
            w[:, 0] = 1.0
        elif w_form == "extreme":
            w = w * 10.0 ** torch.randint(-12, 13, (B, n), generator=g).double()
        elif w_form == "nan":
            w[0, 0] = math.nan
            errors.append("weights")
        elif w_form == "negative":
            w[0, 0] = -1.0
            errors.append("weights")
        elif w_form == "all-zero-set":
            w[draw(st.integers(0, B - 1))] = 0.0
            errors.append("weights")
        elif w_form == "wrong-shape":
            w = w[:, :1] if n > 1 else w[:1].expand(B + 1, 1)
            errors.append("weights")
        if w_form != "wrong-shape":  # padded entries of the weights may hold anything
            w = torch.where(mask, w, torch.tensor(math.nan, dtype=torch.float64))
    kw["weights"] = w
    kw["method"] = draw(st.sampled_from(["auto", "log", "exp"]))
    kw["tol"] = draw(st.sampled_from([None, None, 1e-4]))
    scale_w = draw(st.sampled_from([1.0, 1e-200, 1e200]))
    # garbage in the padded rows of a float tensor input (must not change the plan)
    garbage = draw(st.sampled_from([None, math.nan, math.inf, 1e300]))
    if (garbage is not None and isinstance(sim, torch.Tensor) and sim.dtype == torch.float64
            and sim.dim() == 3 and mask_form not in ("wrong-shape", "none")):
        sim = sim.masked_fill(~mask.unsqueeze(-1), garbage)
    return sim, clean, mask_arg, mask, kw, errors, scale_w


@examples(0.15)
@given(inputs=sinkhorn_inputs())
def test_fuzz_sinkhorn_inputs(inputs):
    """A plan equal to the clean float64 copy's (to ``50 eps max(1, max|K| / epsilon)``, ``eps``
    the plan dtype's machine epsilon: the rounding of ``K / epsilon``), or a clear
    error naming the bad argument; rescaled weights give the same plan."""
    sim, clean, mask_arg, mask, kw, errors, scale_w = inputs
    try:
        P = sinkhorn(sim, mask_arg, **kw)
    except (ValueError, TypeError) as exc:
        assert errors, f"valid input refused: {exc!r}"
        assert any(e in str(exc) for e in errors), f"the error names none of {errors}: {exc!r}"
        return
    assert not errors, f"bad input accepted ({errors})"
    assert isinstance(P, torch.Tensor) and P.shape == clean.shape
    if kw["method"] == "exp" and not torch.isfinite(P).all():
        # documented (skset.ot): the bare exp-domain solver underflows for small epsilon / wide
        # similarities (in float16 and float32 first); "auto" falls back to the log domain
        # there, and the clean float64 reference is computed the same way (with "exp" it
        # underflows too when epsilon is small: K of magnitude 22 at epsilon 0.05)
        kw = dict(kw, method="auto")
        P = sinkhorn(sim, mask_arg, **kw)
    assert torch.isfinite(P).all() and (P >= 0).all()
    assert (P[~mask] == 0).all(), "mass on padded elements"
    ref = sinkhorn(clean, mask, **kw)
    # the stated tolerance: rounding of K / epsilon in the plan's dtype, amplified by exp
    tol = 50 * torch.finfo(P.dtype).eps * max(1.0, float(clean.abs().max()) / kw["epsilon"])
    torch.testing.assert_close(P.double(), ref, rtol=tol, atol=tol * float(ref.abs().max()))
    if kw["weights"] is not None and scale_w != 1.0:
        kw = dict(kw, weights=kw["weights"] * scale_w)
        torch.testing.assert_close(sinkhorn(clean, mask, **kw), ref, rtol=1e-9, atol=1e-12)
