"""Saving and loading fitted estimators without pickle: :func:`save` and :func:`load`.

``pickle`` (and ``joblib``) files can run arbitrary code when they are loaded, so a model file from
an untrusted source must never be unpickled. :func:`save` writes only data: the estimator's class
name, its parameters (as JSON), and its fitted attributes as tensors, numbers, strings, lists and
dicts; torch modules are stored as their ``state_dict`` and rebuilt from the estimator's parameters
on load. :func:`load` reads the file with ``torch.load(weights_only=True)``, whose unpickler only
creates tensors and plain containers and refuses everything else, accepts only the public skset
estimator classes, and checks the format and skset versions.
"""

from __future__ import annotations

import inspect
import io
import json
import math
import os
import re
import warnings
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator

from ._threads import user_stacklevel
from ._torch import resolve_dtype

__all__ = ["save", "load", "FORMAT_VERSION"]

FORMAT_VERSION = 1
_FORMAT = "skset-estimator"
_TAG = "__skset__"
_ATTR_NAME = re.compile(r"^_?[A-Za-z][A-Za-z0-9_]*$")


def _skset_version() -> str:
    from ._version import __version__

    return __version__


def _allowed_classes() -> dict[str, type]:
    """The public skset estimator classes, by name: the ``BaseEstimator`` subclasses defined in
    skset whose name the package exports (``__all__`` of ``skset``, ``skset.neural_network``,
    ``skset.cluster``). Read from the classes already defined, never by importing the package
    root (which imports this module): a model can only be saved or loaded through ``skset``,
    so its estimator modules are loaded by then."""
    import sys

    exported = set()
    for pkg in ("skset", "skset.neural_network", "skset.cluster"):
        exported.update(getattr(sys.modules.get(pkg), "__all__", ()))
    out, todo = {}, [BaseEstimator]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("skset.") and cls.__name__ in exported:
            out[cls.__name__] = cls
    return out


# -- encoding ------------------------------------------------------------------------------------
def _encode(v: Any, where: str):
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, str):  # numpy's str_ too (torch's safe loader refuses it): a plain str
        return str(v)
    if isinstance(v, (int, float)) and type(v) in (int, float):
        return v
    if isinstance(v, np.generic):
        if v.dtype.kind in "biuf":
            return {_TAG: "np_scalar", "dtype": v.dtype.str, "value": v.item()}
        if v.dtype.kind == "U":
            return str(v)
        raise TypeError(f"{where}: cannot save a numpy scalar of dtype {v.dtype}.")
    if isinstance(v, torch.Tensor):
        return {_TAG: "tensor", "data": v.detach().cpu().clone()}
    if isinstance(v, np.ndarray):
        if v.dtype.kind in "biuf" and v.dtype.byteorder == ">":  # e.g. labels read from a file
            v = v.astype(v.dtype.newbyteorder("="))
        if v.dtype.kind in "biuf" and v.dtype.byteorder in ("=", "|", "<"):
            return {_TAG: "ndarray", "data": torch.from_numpy(np.ascontiguousarray(v).copy())}
        if v.dtype.kind == "U":
            return {_TAG: "ndarray_str", "dtype": v.dtype.str, "shape": list(v.shape),
                    "items": [str(x) for x in v.ravel().tolist()]}
        if v.dtype == object:
            return {_TAG: "ndarray_object", "shape": list(v.shape),
                    "items": [_encode(x, where) for x in v.ravel().tolist()]}
        raise TypeError(f"{where}: cannot save an array of dtype {v.dtype}.")
    if isinstance(v, torch.device):
        return {_TAG: "device", "value": str(v)}
    if isinstance(v, torch.dtype):
        return {_TAG: "torch_dtype", "value": str(v).replace("torch.", "")}
    if isinstance(v, torch.nn.Module):
        return {_TAG: "module", "class": type(v).__name__,
                "state": {k: t.detach().cpu().clone() for k, t in v.state_dict().items()}}
    if isinstance(v, BaseEstimator):
        return {_TAG: "estimator", **_encode_estimator(v)}
    if isinstance(v, tuple):
        return {_TAG: "tuple", "items": [_encode(x, where) for x in v]}
    if isinstance(v, list):
        return [_encode(x, where) for x in v]
    v = _series_as_dict(v)  # a class_weight given as a Series, in _model_params_
    if isinstance(v, dict):  # keys: str, int, bool or float (numpy's as Python's: class labels)
        keys = [k.item() if isinstance(k, (np.integer, np.bool_, np.floating)) else str(k)
                if isinstance(k, str) else k for k in v]
        for k in keys:
            if not isinstance(k, (str, int, float)):
                raise TypeError(f"{where}: cannot save a dict key of type {type(k).__name__}.")
        v = dict(zip(keys, v.values()))
        return {_TAG: "dict", "keys": keys, "values": [_encode(v[k], where) for k in keys]}
    raise TypeError(f"{where}: cannot save a value of type {type(v).__name__} without pickle.")


_TUPLE = "__tuple__"
_DICT = "__dict__"  # JSON keys are strings only: a dict parameter is stored as its items


def _json_hook(d: dict):
    if set(d) == {_TUPLE}:
        return tuple(d[_TUPLE])
    if set(d) == {_DICT}:
        return {k: v for k, v in d[_DICT]}
    return d


def _series_as_dict(v):
    """A pandas Series (a ``class_weight`` given as one) as ``{label: value}``; anything else
    as given."""
    if hasattr(v, "to_dict") and hasattr(v, "index") and not hasattr(v, "columns"):
        return v.to_dict()
    return v


def _json_param(name: str, value, cls_name: str):
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if not math.isfinite(value):
            raise TypeError(f"{cls_name}: parameter {name}={value!r} is not finite; it cannot be "
                            "saved.")
        return value
    if isinstance(value, torch.device):  # nested estimators get their parent's device_
        return str(value)
    if name == "dtype" and isinstance(value, torch.dtype):  # a dtype given as an object: its name
        return str(value).replace("torch.", "")
    if name == "dtype" and isinstance(value, (np.dtype, type)):  # np.float32, float, np.dtype
        try:
            return str(resolve_dtype(value)).replace("torch.", "")
        except ValueError:
            pass  # not a dtype skset computes in: refused below
    value = _series_as_dict(value)
    if isinstance(value, tuple):  # JSON has no tuples: tag them so that load gives them back
        return {_TUPLE: [_json_param(name, x, cls_name) for x in value]}
    if isinstance(value, list):
        return [_json_param(name, x, cls_name) for x in value]
    if isinstance(value, np.ndarray) and value.ndim == 1:  # e.g. class_weight: one per class
        return [_json_param(name, x, cls_name) for x in value.tolist()]
    if isinstance(value, np.str_):
        return str(value)
    if isinstance(value, dict):  # e.g. class_weight={class: weight}
        return {_DICT: [[_json_param(name, k, cls_name), _json_param(name, v, cls_name)]
                        for k, v in value.items()]}
    if name == "random_state":
        warnings.warn(f"{cls_name}: random_state={type(value).__name__} cannot be saved; it is "
                      "stored as None (a refit, or a later partial_fit of the loaded model, draws "
                      "afresh).", UserWarning, stacklevel=user_stacklevel())
        return None
    raise TypeError(f"{cls_name}: parameter {name} of type {type(value).__name__} cannot be "
                    "saved (only None, bool, int, float, str, lists, 1-D arrays and dicts of "
                    "them).")


def _encode_estimator(est) -> dict:
    cls_name = type(est).__name__
    allowed = _allowed_classes()
    if allowed.get(cls_name) is not type(est):
        raise TypeError(f"skset.save saves the public skset estimators ({', '.join(sorted(allowed))})"
                        f"; got {type(est).__module__}.{cls_name}.")
    check = getattr(est, "_check_model_params", None)  # the networks: built as their params say
    if check is not None:
        check("skset.save")
    params = {k: _json_param(k, v, cls_name) for k, v in est.get_params(deep=False).items()}
    attrs = {}
    for k, v in vars(est).items():
        # metadata routing's requests (set_fit_request) are no fitted state: not saved
        if k in params or k.startswith("__") or k == "_metadata_request":
            continue
        attrs[k] = _encode(v, f"{cls_name}.{k}")
    return {"class": cls_name, "params": json.dumps(params, sort_keys=True), "attributes": attrs}


# -- decoding ------------------------------------------------------------------------------------
class _FormatError(ValueError):
    pass


def _decode(v: Any, where: str):
    if isinstance(v, dict) and v.get(_TAG) == "estimator":  # its own checks and messages
        return _decode_estimator(v, where)
    try:
        return _decode_entry(v, where)
    except _FormatError:
        raise
    except (KeyError, TypeError, ValueError, RuntimeError, IndexError, AttributeError) as exc:
        kind = v.get(_TAG) if isinstance(v, dict) else type(v).__name__
        raise _FormatError(f"{where}: malformed {kind!r} entry ({type(exc).__name__}: "
                           f"{exc}).") from None


def _decode_entry(v: Any, where: str):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, torch.Tensor):
        raise _FormatError(f"{where}: untagged tensor.")
    if isinstance(v, list):
        return [_decode(x, where) for x in v]
    if not isinstance(v, dict) or not isinstance(v.get(_TAG), str):
        raise _FormatError(f"{where}: unexpected {type(v).__name__}.")
    kind = v[_TAG]
    if kind == "tensor":
        return _tensor(v, "data", where)
    if kind == "ndarray":
        return _tensor(v, "data", where).numpy()
    if kind == "np_scalar":
        dtype = np.dtype(_str(v, "dtype", where))
        if dtype.kind not in "biuf" or not isinstance(v["value"], (bool, int, float)):
            raise _FormatError(f"{where}: bad numpy scalar of dtype {dtype}.")
        return dtype.type(v["value"])
    if kind == "ndarray_str":
        dtype = np.dtype(_str(v, "dtype", where))
        if dtype.kind != "U":
            raise _FormatError(f"{where}: bad string array dtype {dtype}.")
        return np.array([str(x) for x in v["items"]], dtype=dtype).reshape(v["shape"])
    if kind == "ndarray_object":
        items = [_decode(x, where) for x in v["items"]]
        arr = np.empty(len(items), dtype=object)
        arr[:] = items
        return arr.reshape(v["shape"])
    if kind == "device":
        return torch.device(_str(v, "value", where))
    if kind == "torch_dtype":
        dt = getattr(torch, _str(v, "value", where), None)
        if not isinstance(dt, torch.dtype):
            raise _FormatError(f"{where}: unknown torch dtype {v['value']!r}.")
        return dt
    if kind == "tuple":
        return tuple(_decode(x, where) for x in v["items"])
    if kind == "dict":
        keys, values = v["keys"], v["values"]
        if len(keys) != len(values) or not all(isinstance(k, (str, int, float)) for k in keys):
            raise _FormatError(f"{where}: malformed dict.")
        return {k: _decode(x, where) for k, x in zip(keys, values)}
    if kind == "estimator":
        return _decode_estimator(v, where)
    if kind == "module":
        raise _FormatError(f"{where}: a module may only be a fitted attribute of an estimator.")
    raise _FormatError(f"{where}: unknown entry kind {kind!r}.")


def _str(v, key, where) -> str:
    s = v.get(key)
    if not isinstance(s, str):
        raise _FormatError(f"{where}: field {key!r} must be a string.")
    return s


def _tensor(v, key, where) -> torch.Tensor:
    t = v.get(key)
    if not isinstance(t, torch.Tensor):
        raise _FormatError(f"{where}: field {key!r} must be a tensor.")
    return t


def _module_skeleton(est, name: str) -> torch.nn.Module:
    """A freshly built module of the right architecture for fitted attribute ``name`` of ``est``
    (every estimator with a torch module says how to rebuild it, in ``_persist_module``)."""
    builder = getattr(est, "_persist_module", None)
    if builder is None:
        raise _FormatError(f"{type(est).__name__} has no torch module to rebuild.")
    try:
        return builder(name)
    except ValueError as exc:
        raise _FormatError(str(exc)) from None
    except (AttributeError, KeyError, TypeError, IndexError, RuntimeError) as exc:  # missing
        raise _FormatError(f"{type(est).__name__}: cannot rebuild {name} from the fitted "  # or bad
                           f"attributes in the file ({type(exc).__name__}: {exc}).") from None


def _decode_estimator(v: dict, where: str):
    from ._base import SksetEstimator

    cls_name = _str(v, "class", where)
    allowed = _allowed_classes()
    if cls_name not in allowed:
        raise ValueError(f"{where}: {cls_name!r} is not a skset estimator that load() accepts "
                         f"(known: {', '.join(sorted(allowed))}).")
    cls = allowed[cls_name]
    try:
        params = json.loads(_str(v, "params", where), object_hook=_json_hook)
    except json.JSONDecodeError as exc:
        raise _FormatError(f"{where}: the parameters are not valid JSON ({exc}).") from None
    except (TypeError, ValueError) as exc:  # a tagged tuple or dict of the wrong shape
        raise _FormatError(f"{where}: malformed parameters ({exc}).") from None
    if not isinstance(params, dict):
        raise _FormatError(f"{where}: the parameters must be a JSON object.")
    params = cls._upgrade_params(params) if hasattr(cls, "_upgrade_params") else params
    valid = set(cls().get_params(deep=False))
    unknown = set(params) - valid
    if unknown:
        raise ValueError(f"{where}: {cls_name} has no parameter(s) {sorted(unknown)}; the file was "
                         "written by another version of skset.")
    est = cls(**params)
    check = getattr(est, "_check_params", None)
    if check is not None:  # the file's parameters as a fit would check them
        try:
            check()
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{where}: {cls_name} was saved with invalid parameters ({exc}).") \
                from None
    attrs = v.get("attributes")
    if not isinstance(attrs, dict):
        raise _FormatError(f"{where}: missing fitted attributes.")
    state, modules = {}, {}
    for k, enc in attrs.items():
        if not isinstance(k, str) or not _ATTR_NAME.match(k) or k.startswith("__") or k in valid \
                or hasattr(type(inspect.getattr_static(cls, k, None)), "__get__"):
            # (the last: a name of the class's methods or properties, which it would hide)
            raise _FormatError(f"{where}: invalid attribute name {k!r}.")
        if isinstance(enc, dict) and enc.get(_TAG) == "module":
            modules[k] = enc
        else:
            state[k] = _decode(enc, f"{where}.{k}")
    est.__dict__.update(state)  # the module builders read the fitted attributes
    for k, enc in modules.items():
        sd = enc.get("state")
        if not isinstance(sd, dict) or not all(isinstance(t, torch.Tensor) for t in sd.values()):
            raise _FormatError(f"{where}.{k}: malformed module state.")
        with torch.random.fork_rng(devices=[]):  # the skeleton's random init is overwritten
            module = _module_skeleton(est, k)
        if type(module).__name__ != enc.get("class"):
            raise _FormatError(f"{where}.{k}: the file holds a {enc.get('class')!r} but "
                               f"{cls_name} builds a {type(module).__name__!r}.")
        for name, _ in list(module.named_buffers()):  # files written before such a buffer
            path, _, leaf = name.rpartition(".")
            owner = module.get_submodule(path)
            if name not in sd and leaf in getattr(owner, "_optional_buffers", ()):
                setattr(owner, leaf, None)  # the module then computes as it did without it
        floats = [t.dtype for t in sd.values() if t.is_floating_point()]
        if floats:
            module = module.to(dtype=floats[0])
        try:
            module.load_state_dict(sd, strict=True)
        except RuntimeError as exc:
            raise ValueError(f"{where}.{k}: the stored weights do not fit the architecture built "
                             f"from the parameters: {exc}") from None
        module.eval()
        state[k] = module
    if isinstance(est, SksetEstimator):
        est.__setstate__(state)  # device placement, CPU fallback with a warning
    else:
        est.__dict__.update(state)
    return est


# -- public API ----------------------------------------------------------------------------------
def save(estimator, path) -> None:
    """Save a fitted skset estimator to ``path`` without pickling any Python object.

    The file holds the class name, the parameters (JSON), the fitted attributes (arrays as
    tensors, torch modules as their ``state_dict``), the format version and the skset version, in
    ``torch.save``'s zip format. Load it with :func:`load`.

    Parameters
    ----------
    estimator : skset estimator
        A public skset estimator (``skset.__all__``), fitted or not.
    path : str, os.PathLike or binary file object
        Where to write.

    Raises
    ------
    TypeError
        For an estimator that is not a public skset one, or a parameter / attribute that cannot
        be stored as plain data (a ``RandomState`` ``random_state`` is stored as ``None`` with a
        warning).

    See Also
    --------
    load : read the file back.

    Examples
    --------
    >>> import io
    >>> import numpy as np
    >>> import skset
    >>> rng = np.random.default_rng(0)
    >>> sets = [rng.normal(size=(5, 3)) for _ in range(8)]
    >>> otk = skset.OTKEmbedding(n_supports=2, random_state=0).fit(sets)
    >>> buf = io.BytesIO()
    >>> skset.save(otk, buf)
    >>> _ = buf.seek(0)
    >>> np.array_equal(skset.load(buf).transform(sets), otk.transform(sets))
    True
    """
    payload = {
        "format": _FORMAT,
        "format_version": FORMAT_VERSION,
        "skset_version": _skset_version(),
        "torch_version": str(torch.__version__),
        "estimator": _encode_estimator(estimator),
    }
    if isinstance(path, (str, os.PathLike)):
        path = os.fspath(path)
        if os.path.isdir(path):
            raise IsADirectoryError(f"skset.save: {path!r} is a directory; give a file path.")
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise FileNotFoundError(f"skset.save: the directory {parent!r} does not exist.")
    elif not (hasattr(path, "write") and not isinstance(path, io.TextIOBase)):
        raise TypeError(f"skset.save writes to a path or a binary file object, got "
                        f"{type(path).__name__}.")
    torch.save(payload, path)


def load(path, *, strict_version: bool = True):
    """Load an estimator written by :func:`save`; never runs code stored in the file.

    The file is read with ``torch.load(weights_only=True)`` (tensors and plain containers only;
    anything else in it is refused), the class must be a public skset estimator, the parameters
    are JSON, and torch modules are rebuilt from the parameters and filled from their stored
    weights. Tensors go to the device the model was fitted on when it is available here, else to
    the CPU with a warning.

    Parameters
    ----------
    path : str, os.PathLike or binary file object
        The file.
    strict_version : bool, default=True
        Raise when the file was written by another skset version. ``False`` loads it anyway
        (with a warning); the format version must match in any case. A fitted attribute that
        this version reads and the file lacks then fails where it is read, with an
        ``AttributeError`` that names the file's skset version.

    Returns
    -------
    estimator
        The estimator, as it was saved.

    Raises
    ------
    ValueError
        For a file that is not a skset file, holds pickled objects, was written by another format
        or skset version, names an unknown class, or whose weights do not fit the architecture.

    See Also
    --------
    save : write the file.
    """
    import pickle

    if isinstance(path, (bytes, bytearray, memoryview)):
        raise TypeError(f"skset.load takes a path or a binary file object, got {type(path).__name__} "
                        "(for a file's contents in memory: skset.load(io.BytesIO(data))).")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's notes on foreign pickle protocols
            payload = torch.load(path, map_location="cpu", weights_only=True)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except pickle.UnpicklingError as exc:
        raise ValueError(
            f"refusing to load {path!r}: it holds Python objects other than tensors and plain "
            f"containers (a pickle that could run code), so it was not written by skset.save. "
            f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
        ) from None
    except Exception as exc:  # the restricted unpickler fails in many ways on foreign files
        raise ValueError(f"{path!r} is not a file written by skset.save "
                         f"({type(exc).__name__}: {exc}).") from None
    if not isinstance(payload, dict) or payload.get("format") != _FORMAT:
        raise ValueError(f"{path!r} is not a file written by skset.save.")
    fv = payload.get("format_version")
    if fv != FORMAT_VERSION:
        raise ValueError(f"{path!r} uses skset save format version {fv!r}; this skset "
                         f"({_skset_version()}) reads version {FORMAT_VERSION} only.")
    sv = payload.get("skset_version")
    if sv != _skset_version():
        msg = (f"{path!r} was saved with skset {sv}, this is skset {_skset_version()}; fitted "
               "state may differ between versions.")
        if strict_version:
            raise ValueError(msg + " Pass strict_version=False to load it anyway, or refit.")
        warnings.warn(msg, UserWarning, stacklevel=2)
    est = payload.get("estimator")
    if not isinstance(est, dict):
        raise ValueError(f"{path!r} holds no estimator.")
    est = _decode_estimator(est, "estimator")
    if sv != _skset_version() and "_state_version" not in vars(est):
        # a fitted attribute this version reads and the file lacks is then named as such
        est._state_version = str(sv)
    return est
