"""Inference fast paths agree with the plain formulas they replace."""

import numpy as np
import pytest
import torch

from skset._sets import check_finite_output
from skset.nn import gaussian_kernel


def _naive_gaussian(x, w, bw):
    d2 = ((x[..., :, None, :] - w[None, :, :]) ** 2).sum(-1)
    return torch.exp(-d2 / (2 * bw**2))


@pytest.mark.parametrize("shape", [(50, 7), (3, 20, 7)])
def test_gaussian_kernel_inference_path_matches_naive_and_autograd_path(shape):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=g, dtype=torch.float64) * 3
    w = torch.randn(11, 7, generator=g, dtype=torch.float64) * 3
    w[0] = x.reshape(-1, 7)[0]  # a zero distance: clamped, exp(0) = 1
    ref = _naive_gaussian(x, w, 1.7)
    with torch.no_grad():
        fast = gaussian_kernel(x, w, 1.7)
    slow = gaussian_kernel(x.requires_grad_(), w, 1.7)  # the differentiable path
    assert slow.requires_grad
    torch.testing.assert_close(fast, ref, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(slow.detach(), ref, rtol=1e-10, atol=1e-12)
    assert float(fast.reshape(-1, 11)[0, 0]) == 1.0
    assert fast.shape == (*shape[:-1], 11)


def test_gaussian_kernel_does_not_modify_inputs():
    x = torch.randn(5, 3)
    w = torch.randn(4, 3)
    x0, w0 = x.clone(), w.clone()
    with torch.no_grad():
        gaussian_kernel(x, w, 1.0)
    assert torch.equal(x, x0) and torch.equal(w, w0)


@pytest.mark.parametrize("to", [np.asarray, torch.as_tensor])
def test_check_finite_output_sum_shortcut(to):
    big = to(np.full((4, 3), 3e38, dtype=np.float32))  # finite values whose sum overflows
    check_finite_output(big, "Est", torch.float32)  # no false alarm
    for bad in (np.nan, np.inf, -np.inf):
        arr = np.ones((4, 3), dtype=np.float32)
        arr[2, 1] = bad
        with pytest.raises(ValueError, match="Est produced non-finite"):
            check_finite_output(to(arr), "Est", torch.float32)


@pytest.mark.parametrize("device", ["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
def test_nystrom_transform_chunked_equals_one_chunk(device):
    from skset import NystromFeatures

    rng = np.random.default_rng(0)
    X = [rng.standard_normal((n, 3)) for n in (5, 9, 2, 7)]
    nf = NystromFeatures(n_components=6, device=device, random_state=0).fit(X)
    one = nf.transform(X)
    chunked = nf.set_params(max_elements=4).transform(X)  # 23 elements in 6 chunks
    for a, b in zip(one, chunked, strict=True):
        # float32 rounding only: matrix products of other shapes may take other kernels (seen on a
        # GPU, and on a 16-core x86 CPU: 1.2e-7)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
