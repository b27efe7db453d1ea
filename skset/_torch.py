"""Device, dtype and random-state helpers shared by the estimators."""

from __future__ import annotations

import copy
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from sklearn.utils import check_random_state

from ._threads import usable_cores, worker_thread_init

__all__ = [
    "resolve_device",
    "resolve_dtype",
    "seed_from_random_state",
    "random_streams",
    "make_generator",
    "map_on_threads",
    "CPU_CHUNK_PAIRS",
    "GLOBAL_RNG_LOCK",
]

#: held while a network is built from torch's process-wide generator, seeded (fits in threads,
#: joblib's threading backend or dask workers of several threads, reseeded one generator side
#: by side, and the same random_state gave different networks: a Set Transformer's
#: probabilities 0.04-0.11 apart); dropout masks are drawn from a generator of each fit
GLOBAL_RNG_LOCK = threading.RLock()

#: padded pairs (``n_i ** 2`` summed) per chunk of instances that :func:`map_on_threads` runs on
#: a CPU: the batched eigendecompositions of ``skset.cluster._eigengap`` and the inference of
#: ``ABCClusterer`` (``skset.cluster._abc_predict``); a chunk's activations then stay in cache
CPU_CHUNK_PAIRS = 1 << 18


def resolve_device(device) -> torch.device:
    """Turn ``"auto"``/``"cpu"``/``"cuda"``/``"cuda:1"``/``torch.device`` into a ``torch.device``.

    ``"auto"`` picks CUDA when it is available, else the CPU. Asking for CUDA (or another
    backend) on a machine without it, or for torch's ``"meta"`` device (shapes without values),
    raises a ``ValueError`` (rather than a torch error deep inside ``fit``).
    """
    if device is None or (isinstance(device, str) and device == "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device={device!r} is not a valid torch device: {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but CUDA is not available; use "
                         "device='auto' or 'cpu'.")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"device={device!r} was requested but this machine has "
                         f"{torch.cuda.device_count()} CUDA device(s); use 'cuda' or 'auto'.")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device={device!r} was requested but MPS is not available.")
    if dev.type == "meta":  # tensors of shapes without values: nothing to fit or transform
        raise ValueError(f"device={device!r} holds no values (torch's meta tensors carry shapes "
                         "only); use device='auto', 'cpu', 'cuda' or 'mps'.")
    if dev.type not in ("cpu", "cuda", "mps"):  # another backend (xpu, ...): its own check
        backend = getattr(torch, dev.type, None)
        if not getattr(backend, "is_available", lambda: False)():
            raise ValueError(f"device={device!r} was requested but torch has no available "
                             f"{dev.type!r} backend here; use device='auto' or 'cpu'.")
    return dev


def resolve_dtype(dtype) -> torch.dtype:
    """``"float32"``/``"float64"``/numpy or torch float dtypes -> torch dtype."""
    if isinstance(dtype, torch.dtype) and dtype in (torch.float32, torch.float64):
        return dtype
    try:
        nd = np.dtype(dtype)
    except TypeError:
        nd = None
    if nd == np.float32:
        return torch.float32
    if nd == np.float64:
        return torch.float64
    raise ValueError(f"dtype={dtype!r} is not supported; use 'float32' or 'float64'.")


def seed_from_random_state(random_state) -> int:
    """An int seed drawn from ``random_state`` (None, int or RandomState), as scikit-learn does."""
    return int(check_random_state(random_state).randint(np.iinfo(np.int32).max))


def random_streams(random_state) -> tuple[int, np.random.RandomState]:
    """The one way skset derives randomness from ``random_state``: an int seed (torch
    initialisation, ``torch.Generator`` shuffling, splits) and a numpy ``RandomState`` seeded with
    it for every further draw (k-means starts, seeds of inner estimators, sampled instances)."""
    seed = seed_from_random_state(random_state)
    return seed, np.random.RandomState(seed)


def make_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A torch Generator on ``device`` seeded with ``seed``; the global RNG is left untouched."""
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g


def map_on_threads(fn, items, device: torch.device | str = "cpu") -> list:
    """``[fn(item) for item in items]``; on a CPU device, spread over ``torch.get_num_threads()``
    Python threads that each run torch with one intra-op thread.

    Many small, independent batched operations (a chunk of small eigendecompositions, attention
    over a chunk of short sets) run faster this way than one big call on all intra-op threads:
    LAPACK's threading overhead on small matrices is larger than the work (a batched ``eigh`` of
    small matrices is slower on 2 OpenMP threads than on 1; user guide, clustering, Cost), and a chunk's
    activations stay in cache. The total number of busy threads stays ``torch.get_num_threads()`` (so
    :func:`skset.utils.limit_threads` still bounds it), and the calling thread's setting is
    restored afterwards. On other devices the items run one after the other. Each item runs on
    one intra-op thread, as on one thread, so the results do not depend on the number of
    threads. The threads meet only at the end of the map: on a machine busy with other processes
    they still pay off, unlike the many small calls of a BLAS pool (the S1 transform of
    ``benchmarks/bench_threads.py`` beside two busy processes, load average about 20: 0.90 s on
    two threads, 1.52 s on one).

    Gradient mode is thread-local in torch: ``fn`` must enter ``torch.no_grad()`` itself.
    """
    items = list(items)
    n = torch.get_num_threads()
    if torch.device(device).type != "cpu" or n <= 1:
        return [fn(item) for item in items]
    if len(items) <= 1:  # one intra-op thread as well: the same rounding as on the threads
        torch.set_num_threads(1)
        try:
            return [fn(item) for item in items]
        finally:
            torch.set_num_threads(n)
    try:
        with ThreadPoolExecutor(min(n, len(items)), initializer=worker_thread_init) as pool:
            return list(pool.map(fn, items))
    finally:
        # torch.set_num_threads also sets MKL's process-wide count: restore it
        torch.set_num_threads(n)


def split_for_threads(batches: list, device: torch.device | str = "cpu",
                      min_sets: int = 16) -> list:
    """``batches`` (index arrays) cut so that :func:`map_on_threads` can keep every torch thread
    busy to the end: on a CPU with ``t > 1`` usable cores (:func:`skset._threads.usable_cores`),
    the largest batch is halved until there are ``2 t`` batches (or batches of ``min_sets``
    sets). Each set stays in exactly one batch; elsewhere ``batches`` is returned as is.

    The cut follows the machine's cores, not the number of threads of the call: a set's padding
    (hence the rounding of its embedding) is then the same whatever the thread setting."""
    t = usable_cores()
    if torch.device(device).type != "cpu" or t <= 1:
        return list(batches)
    out = [np.asarray(b) for b in batches]
    while len(out) < 2 * t:
        big = max(range(len(out)), key=lambda i: len(out[i])) if out else None
        if big is None or len(out[big]) < 2 * min_sets:
            break
        b = out.pop(big)
        out[big:big] = [b[: len(b) // 2], b[len(b) // 2:]]
    return out


def _map_tensors(obj, fn_tensor, fn_module):
    """Rebuild ``obj`` with ``fn_tensor``/``fn_module`` applied to every tensor and module in it,
    through nested dicts, lists and tuples (an optimizer ``state_dict``); other objects as is."""
    if isinstance(obj, torch.Tensor):
        return fn_tensor(obj)
    if isinstance(obj, torch.nn.Module):
        return fn_module(obj)
    if isinstance(obj, dict):
        out = copy.copy(obj)  # keeps the mapping's type (OrderedDict, defaultdict)
        for k, v in obj.items():
            out[k] = _map_tensors(v, fn_tensor, fn_module)
        return out
    if isinstance(obj, (list, tuple)):
        items = [_map_tensors(v, fn_tensor, fn_module) for v in obj]
        if type(obj) is list:
            return items
        if hasattr(obj, "_fields"):  # namedtuple
            return type(obj)(*items)
        return type(obj)(items)
    return obj


def _to_cpu(obj, clone: bool = False):
    """``obj`` with every tensor and module nested in it on the CPU, detached from autograd.

    Modules are deep-copied (moving one is in place); tensors already on the CPU are shared unless
    ``clone`` (a copy that owns its memory, e.g. an optimizer state kept past the optimizer).
    """
    def tensor(t):
        t = t.detach().cpu()
        return t.clone() if clone else t

    return _map_tensors(obj, tensor, lambda m: copy.deepcopy(m).cpu())


def _to_device(obj, device):
    """``obj`` with every tensor and module nested in it moved to ``device`` (modules in place),
    inference tensors (made under ``torch.inference_mode()``, as by a load inside it) replaced by
    ordinary copies, which a later fit can train."""
    def tensor(t):
        with torch.inference_mode(False):
            return (t.clone() if t.is_inference() else t).to(device)

    def module(m):
        with torch.inference_mode(False):
            for mod in m.modules():
                for name, p in mod._parameters.items():
                    if p is not None and p.is_inference():
                        mod._parameters[name] = torch.nn.Parameter(p.clone(), p.requires_grad)
                for name, b in mod._buffers.items():
                    if b is not None and b.is_inference():
                        mod._buffers[name] = b.clone()
            return m.to(device)

    return _map_tensors(obj, tensor, module)


