import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def make_sets(rng, n_sets=12, d=4, low=3, high=15, dtype=np.float64):
    return [rng.normal(size=(int(n), d)).astype(dtype) for n in rng.integers(low, high, n_sets)]


@pytest.fixture
def sets(rng):
    return make_sets(rng)


def make_blob_instances(n=12, seed=0):
    """Clustering instances of 2 or 3 separated Gaussian blobs in 3-D (alternately), 3-6
    elements a blob, with per-element labels ``0 .. k - 1``."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for i in range(n):
        k = 2 + i % 2
        sizes = rng.integers(3, 7, k)
        centres = rng.normal(scale=4, size=(k, 3))
        X.append(np.concatenate([c + 0.3 * rng.normal(size=(m, 3))
                                 for c, m in zip(centres, sizes, strict=True)]))
        y.append(np.repeat(np.arange(k), sizes))
    return X, y


# ----------------------------------------------------------------------------- a GPU fit, simulated
def _restore_on_gpu(t):
    """Unpickle ``t`` on the GPU as torch does a CUDA tensor (fails where CUDA is not available)."""
    storage = torch.serialization.default_restore_location(t.untyped_storage(), "cuda:0")
    return torch.empty(0, dtype=t.dtype, device=storage.device).set_(storage, 0, t.shape,
                                                                      t.stride())


class OnGPU(torch.Tensor):
    """A CPU tensor that behaves as a CUDA one where it matters here: its ``device`` says cuda, it
    pickles as a CUDA tensor (loading it without CUDA raises torch's own error), and only
    ``.cpu()`` / ``.to("cpu")`` turn it into a plain CPU tensor."""

    __torch_function__ = torch._C._disabled_torch_function_impl
    device = property(lambda self: torch.device("cuda", 0))
    is_cuda = property(lambda self: True)

    def _plain(self):
        return torch.Tensor.detach(self).as_subclass(torch.Tensor)

    def detach(self):
        return self._plain().as_subclass(OnGPU)

    def clone(self, *args, **kwargs):
        return self._plain().clone().as_subclass(OnGPU)

    def __deepcopy__(self, memo):  # a deep copy of a GPU tensor stays on the GPU
        return self.clone()

    def cpu(self, *args, **kwargs):
        return self._plain().to("cpu", copy=True)

    def to(self, *args, **kwargs):
        dev = torch._C._nn._parse_to(*args, **kwargs)[0]
        return self.cpu() if dev is not None and dev.type == "cpu" else self

    def __reduce_ex__(self, protocol):
        return _restore_on_gpu, (self._plain().clone(),)


def tensors(obj):
    """Every tensor reachable from ``obj`` through dicts, lists, tuples, modules (parameters and
    buffers) and fitted skset estimators (their attributes), in a fixed order."""
    from sklearn.base import BaseEstimator

    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, torch.nn.Module):
        return list(obj.parameters()) + list(obj.buffers())
    if isinstance(obj, BaseEstimator):
        obj = vars(obj)
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in tensors(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in tensors(v)]
    return []


def _map_tensors(obj, fn):
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _map_tensors(v, fn) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_tensors(v, fn) for v in obj)
    return obj


def simulate_gpu_fit(est):
    """Make the fitted ``est`` look fitted on a GPU, in place: ``device_`` is cuda:0 (nested
    estimators too), and every tensor of its attributes -- nested in dicts, lists and tuples such
    as an optimizer ``state_dict``, and the modules' buffers -- becomes an :class:`OnGPU`.
    (Module parameters stay plain: ``Module.cpu()`` moves a CPU parameter by ``.data =``, which
    would keep the subclass.) Returns the number of tensors made :class:`OnGPU`."""
    from sklearn.base import BaseEstimator

    def on_gpu(t):
        return t.detach().as_subclass(OnGPU)

    n = 0
    if hasattr(est, "device_"):
        est.device_ = torch.device("cuda", 0)
    for k, v in vars(est).items():
        if isinstance(v, BaseEstimator):
            n += simulate_gpu_fit(v)
        elif isinstance(v, torch.nn.Module):
            for mod in v.modules():
                for name, b in mod._buffers.items():
                    if b is not None:
                        mod._buffers[name] = on_gpu(b)
                        n += 1
        elif tensors(v):
            setattr(est, k, _map_tensors(v, on_gpu))
            n += len(tensors(v))
    return n
