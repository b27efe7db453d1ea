"""Attention weights of the Set Transformer: ``record_attention``, ``SetTransformer.attention_weights``
and the estimators' ``attention_weights``.

References: a manual softmax of ``Q K^T / sqrt(head_dim)`` recomputed in numpy from the inputs each
attention module received and its own projections; the same set alone and unpadded; a permuted set.
"""

import numpy as np
import pytest
import torch

from skset import (
    DeepSetsClassifier,
    SetTransformerClassifier,
    SetTransformerRegressor,
)
from skset.nn import MultiheadAttention, SetTransformer, record_attention

torch.set_num_threads(1)
DT = torch.float64

CONFIGS = {
    "sab": dict(n_inducing=None),
    "isab": dict(n_inducing=3, n_seeds=2, norm="set", residual="clean"),
    "sab_decoder": dict(n_inducing=None, n_seeds=2, decoder="sab", norm=None),
}
EXPECTED_NAMES = {
    "sab": {"blocks.0", "blocks.1", "pool"},
    "isab": {"blocks.0.mab1", "blocks.0.mab2", "blocks.1.mab1", "blocks.1.mab2", "pool"},
    "sab_decoder": {"blocks.0", "blocks.1", "pool", "pool_sab"},
}


def _net(config, d=3):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return SetTransformer(d, 8, 2, 2, 2, **CONFIGS[config]).to(DT).eval()


def _batch(lengths, d=3, seed=0, garbage=1e3):
    """Random sets of the given lengths, padded with large garbage (not zeros)."""
    g = torch.Generator().manual_seed(seed)
    n = max(lengths)
    x = garbage * torch.randn(len(lengths), n, d, generator=g, dtype=DT)
    mask = torch.arange(n) < torch.tensor(lengths)[:, None]
    sets = [torch.randn(k, d, generator=g, dtype=DT) for k in lengths]
    for b, s in enumerate(sets):
        x[b, : len(s)] = s
    return sets, x, mask


@pytest.mark.parametrize("config", list(CONFIGS))
def test_names_shapes_rows_and_padding(config):
    net = _net(config)
    lengths = [5, 2, 7]
    _, x, mask = _batch(lengths)
    with torch.no_grad(), record_attention(net) as rec:
        net(x, mask)
    assert set(rec) == EXPECTED_NAMES[config]
    for name, w in rec.items():
        assert w.shape[:2] == (3, 2)
        qm, km = rec.masks[name]
        if km is not None:  # padded keys get exactly 0 weight
            assert torch.all(w.masked_select(~km[:, None, None, :]) == 0)
        rows = w.sum(-1)
        if qm is not None:  # rows of padded queries are recorded as 0
            assert torch.all(rows.masked_select(~qm[:, None, :]) == 0)
            rows = rows.masked_select(qm[:, None, :])
        np.testing.assert_allclose(rows.numpy(), 1.0, atol=1e-12)
    per_set = net.attention_weights(x, mask)
    m, k = 3, CONFIGS[config].get("n_seeds", 1)
    for n, ws in zip(lengths, per_set):
        for name, w in ws.items():
            expected = {"mab1": (m, n), "mab2": (n, m), "pool": (k, n), "pool_sab": (k, k)}.get(
                name.rsplit(".", 1)[-1], (n, n))
            assert w.shape == (2, *expected), name
            np.testing.assert_allclose(w.sum(-1).numpy(), 1.0, atol=1e-12)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_same_weights_alone_and_in_padded_batch(config):
    net = _net(config)
    sets, x, mask = _batch([4, 9, 1, 6])
    batched = net.attention_weights(x, mask)
    for s, wb in zip(sets, batched):
        alone = net.attention_weights(s[None])[0]  # no mask, no padding
        assert set(alone) == set(wb)
        for name in alone:
            np.testing.assert_allclose(wb[name].numpy(), alone[name].numpy(), rtol=1e-10,
                                       atol=1e-12)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_weights_equal_manual_softmax_of_projections(config):
    """Recompute softmax(q k^T / sqrt(head_dim)) per set and head in numpy from the module's inputs
    (captured by a hook) and its projection weights."""
    net = _net(config)
    _, x, mask = _batch([6, 3])
    inputs = {}
    hooks = [m.register_forward_pre_hook(
        lambda mod, args, name=name: inputs.__setitem__(name, args))
        for name, m in net.named_modules() if isinstance(m, MultiheadAttention)]
    try:
        with torch.no_grad(), record_attention(net) as rec:
            net(x, mask)
    finally:
        for h in hooks:
            h.remove()
    assert len(inputs) == len(rec)
    for mod_name, args in inputs.items():
        name = mod_name.removesuffix(".attn").removesuffix(".mab")
        attn = net.get_submodule(mod_name)
        query, key = args[0].detach().numpy(), args[1].detach().numpy()
        key_mask = args[3] if len(args) > 3 else None
        Wq, bq = attn.q_proj.weight.detach().numpy(), attn.q_proj.bias.detach().numpy()
        Wk, bk = attn.k_proj.weight.detach().numpy(), attn.k_proj.bias.detach().numpy()
        hd = attn.head_dim
        for b in range(query.shape[0]):
            keys = np.arange(key.shape[1]) if key_mask is None else np.flatnonzero(key_mask[b])
            Q = query[b] @ Wq.T + bq
            K = key[b, keys] @ Wk.T + bk
            for h in range(attn.n_heads):
                S = Q[:, h * hd:(h + 1) * hd] @ K[:, h * hd:(h + 1) * hd].T / np.sqrt(hd)
                P = np.exp(S - S.max(1, keepdims=True))
                P /= P.sum(1, keepdims=True)
                got = rec[name][b, h].numpy()
                qm = rec.masks[name][0]
                rows = np.arange(Q.shape[0]) if qm is None else np.flatnonzero(qm[b])
                np.testing.assert_allclose(got[np.ix_(rows, keys)], P[rows], rtol=1e-9,
                                           atol=1e-12)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_permutation_equivariance(config):
    net = _net(config)
    sets, _, _ = _batch([7])
    s = sets[0]
    perm = torch.randperm(7, generator=torch.Generator().manual_seed(1))
    w = net.attention_weights(s[None])[0]
    wp = net.attention_weights(s[perm][None])[0]
    for name in w:
        last = name.rsplit(".", 1)[-1]
        rows_are_elements = last not in ("mab1", "pool", "pool_sab")
        cols_are_elements = last not in ("mab2", "pool_sab")
        expected = w[name]
        if rows_are_elements:
            expected = expected[:, perm]
        if cols_are_elements:
            expected = expected[:, :, perm]
        np.testing.assert_allclose(wp[name].numpy(), expected.numpy(), rtol=1e-9, atol=1e-12)


def test_recording_leaves_outputs_unchanged_and_switches_off():
    net = _net("isab")
    _, x, mask = _batch([5, 2])
    with torch.no_grad():
        plain = net(x, mask)
        with record_attention(net) as rec:
            recorded = net(x, mask)
        after = net(x, mask)
    assert torch.equal(plain, recorded) and torch.equal(plain, after)
    assert all(m._record is None for m in net.modules() if isinstance(m, MultiheadAttention))
    assert rec  # filled inside the block only


def _sets(n_sets=16, seed=0):
    rng = np.random.default_rng(seed)
    X = [rng.normal(loc=5.0, scale=3.0, size=(rng.integers(2, 8), 2)) for _ in range(n_sets)]
    y = np.array([float(s[:, 0].max()) for s in X])
    return X, y


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("Est", [SetTransformerClassifier, SetTransformerRegressor])
@pytest.mark.parametrize("n_inducing", [None, 3])
def test_estimator_attention_weights_standardised_single_sets(Est, n_inducing):
    X, y = _sets()
    if Est is SetTransformerClassifier:
        y = (y > np.median(y)).astype(int)
    est = Est(hidden_size=8, n_layers=1, n_heads=2, n_inducing=n_inducing, max_iter=2,
              batch_size=4, random_state=0, device="cpu", dtype="float64").fit(X, y)
    assert not np.allclose(est.mean_, 0)  # the standardisation is active
    weights = est.attention_weights(X)
    assert len(weights) == len(X)
    net = est.module_
    for s, w in zip(X, weights):
        z = torch.as_tensor((s - est.mean_) / est.scale_)[None]
        ref = net.attention_weights(z)[0]  # the set alone, standardised by hand
        assert set(w) == set(ref)
        for name in ref:
            assert isinstance(w[name], np.ndarray)
            np.testing.assert_allclose(w[name], ref[name].numpy(), rtol=1e-10, atol=1e-12)
        assert w["pool"].shape == (2, 1, len(s))
    # the raw (unstandardised) sets give other weights: the standardisation is really used
    raw = net.attention_weights(torch.as_tensor(X[0])[None])[0]
    assert not np.allclose(raw["pool"].numpy(), weights[0]["pool"])


def test_deep_sets_have_no_attention_weights():
    assert not hasattr(DeepSetsClassifier(), "attention_weights")
