"""Every module and function of ``skset.nn`` that takes a mask reads it the same way: a bool
tensor, 0/1 integers or floats, a numpy array or a nested list give the same output, and a mask of
another shape is refused by name (it was a torch error deep in the module, or a silent
broadcast)."""

import numpy as np
import pytest
import torch

import skset.nn as snn
from skset.nn import spectral

MASK = [[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1]]


def _x(d=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, 6, d, generator=g, dtype=torch.float64)


def _affinity():
    z = _x(4)
    return torch.exp(-torch.cdist(z, z) ** 2)


def _calls():
    torch.manual_seed(0)
    st = snn.SetTransformer(3, 8, 2, n_inducing=2).double().eval()
    ds = snn.DeepSets(3, 8, 2, pooled_skip=True, pooling="sized_mean").double().eval()
    otk = snn.OTKLayer(3, 4, 2).double()
    nys = snn.NystromLayer(3, 5, window=2, kmer_coding="plain",
                           anchors=torch.randn(5, 6, dtype=torch.float64))
    abc = snn.ABCKernel(3, 8, 1, 2, input_similarity="knn", n_neighbors=2).double().eval()
    mab = snn.MAB(3, 1, norm="set").double().eval()
    sn = snn.SetNorm(3).double()
    sab = snn.SAB(3, 1).double().eval()
    dk = snn.DilatedKernelPPV([1], torch.randn(1, 84, 2, dtype=torch.float64)).double()
    x, x1 = _x(), _x(seed=1)
    labels = torch.tensor([[0, 0, 1, 1, 0, 0], [0, 1, 1, 2, 2, 0]])
    k = torch.tensor([2, 3])
    gen = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    return {
        "SetTransformer": lambda m: st(x, m),
        "DeepSets": lambda m: ds(x, m),
        "masked_pool": lambda m: snn.masked_pool(x, m, "max"),
        "set_norm": lambda m: snn.set_norm(x, m),
        "SetNorm": lambda m: sn(x, m),
        "MAB": lambda m: mab(x, x1, m, m),
        "SAB": lambda m: sab(x, m),
        "OTKLayer": lambda m: otk(x, m),
        "OTKLayer.plans": lambda m: otk.plans(x, m),
        "otk_embed": lambda m: snn.otk_embed(x, m, otk.references, epsilon=0.5),
        "otk_plans": lambda m: snn.otk_plans(x, m, otk.references, epsilon=0.5),
        "NystromLayer": lambda m: nys(x, m)[0],
        "kmer_unfold": lambda m: snn.kmer_unfold(x, m, 2)[0],
        "ABCKernel": lambda m: abc(x, m),
        "abc_affinity": lambda m: snn.abc_affinity(_affinity(), m),
        "abc_loss": lambda m: snn.abc_loss(_affinity(), labels, m),
        "same_cluster_matrix": lambda m: snn.same_cluster_matrix(labels, m),
        "DilatedKernelPPV": lambda m: dk(x[..., :1], m),
        "kernel_responses": lambda m: snn.kernel_responses(x[..., :1], m, 1),
        "normalized_laplacian": lambda m: snn.normalized_laplacian(_affinity(), m),
        "laplacian_eigh": lambda m: snn.laplacian_eigh(_affinity(), m, eigenvectors=False),
        "spectral_cluster": lambda m: spectral.spectral_cluster(_affinity(), m, k,
                                                                generator=gen()),
        "batched_kmeans": lambda m: snn.batched_kmeans(x, m, k, generator=gen())[0],
    }


CALLS = sorted(_calls())
FORMS = {
    "int64": lambda: torch.tensor(MASK),
    "float": lambda: torch.tensor(MASK, dtype=torch.float32),
    "numpy bool": lambda: np.array(MASK, dtype=bool),
    "numpy int": lambda: np.array(MASK),
    "list": lambda: MASK,
}


def _out(value):
    return value[0] if isinstance(value, tuple) else value


@pytest.mark.parametrize("name", CALLS)
def test_mask_forms_give_the_bool_mask_output(name):
    calls = _calls()
    ref = _out(calls[name](torch.tensor(MASK, dtype=torch.bool)))
    assert torch.isfinite(ref.double()).all() if ref.dtype != torch.bool else True
    for form, make in FORMS.items():
        out = _out(_calls()[name](make()))
        torch.testing.assert_close(out, ref, msg=f"{name} with a {form} mask")


@pytest.mark.parametrize("name", CALLS)
def test_mask_of_another_shape_is_refused_by_name(name):
    with pytest.raises(ValueError, match="mask must have shape"):
        _calls()[name](torch.ones(2, 5, dtype=torch.bool))
