"""Fitted estimators as one torch module or one ONNX graph, for serving without skset.

:func:`serving_module` turns a fitted estimator into a torch module ``forward(x, mask)`` on a padded
batch (``x (B, n, d)``, ``mask (B, n)`` boolean, ``True`` on real elements, real elements first)
that does everything the estimator does between its checked input and its output: the input
standardisation (``mean_``, ``scale_``), the network, the output head and the output transform
(softmax, target scale). :func:`export_onnx` writes that module as an ONNX file with dynamic batch
and set-size axes; :func:`pad_sets` builds its inputs and :func:`run_onnx` runs it with
onnxruntime on a list of sets. The module also goes through :func:`torch.export.export` as it is
(see the user guide page "Exporting a model").

Outputs (names of the ONNX outputs, in order):

* classifiers (Set Transformer, Deep Sets, supervised OTK): ``decision_function`` ``(B, C)``
  (``(B,)`` with two classes, the score of ``classes_[1]``, as the estimator's),
  ``predict_proba`` ``(B, C)``, ``predict_index`` ``(B,)`` (int64, the label is
  ``classes_[predict_index]``) and ``transform`` ``(B, n_features_out)``; fitted on multi-label
  targets: ``decision_function`` ``(B, L)``, ``predict_proba`` ``(B, L)`` (the sigmoid of each
  label's logit), ``predict`` ``(B, L)`` (int64, the 0/1 indicator of logit > 0) and
  ``transform``;
* regressors: ``predict`` ``(B,)`` or ``(B, n_outputs)`` (like the estimator's), float64 whatever
  the estimator's dtype (the target scale and mean are applied in float64, as ``predict`` does:
  targets far from zero keep their digits), and ``transform``;
* :class:`~skset.OTKEmbedding`: ``transform`` ``(B, n_references * n_supports * d)``;
* :class:`~skset.NystromFeatures`: ``transform`` ``(B, n - (window - 1) * dilation,
  n_components_)`` and ``transform_mask``, the real rows of each set.
* :class:`~skset.DilatedKernelFeatures`: ``transform`` ``(B, n_features_out)``.

OTK's Sinkhorn: the estimators run the exp-domain iterations and redo in the log domain the sets
whose scalings under- or overflow (a data-dependent branch no graph can hold). The exported graph
runs one domain for every set, ``sinkhorn_method="log"`` by default: the same iterates, so the same
plans up to rounding, and no overflow for any input (but a ``float32`` set whose similarity spans
more than 8,192 times ``epsilon``, which the estimators solve in ``float64`` and a ``float32``
graph cannot: export in ``float64`` or standardise such features). ``"exp"`` is faster and equal wherever the
estimator did not fall back; where it would have (small ``epsilon`` relative to the features'
scale) its outputs are NaN, since a graph cannot branch: use ``"log"`` there.

The iteration count is fixed (``sinkhorn_iter``): the supervised models use a fixed count anyway;
:class:`~skset.OTKEmbedding` stops at ``sinkhorn_tol`` by default, so its export needs an explicit
count and then differs from ``transform`` by what the iterations after that count would still
change (often far more than the tolerance at a hundred iterations: compare the two on your sets),
or is fitted with ``sinkhorn_tol=None`` and a fixed count, which the export then repeats.

Rounding at small ``epsilon``: the two domains round differently. The log domain adds ``K / epsilon``
to potentials of the same size, so in float32 its plan entries carry relative errors up to about
``1e-7 * max|K| / epsilon``, where the exp domain shifts each row by its largest entry first. With
the default ``epsilon`` (0.1 for :class:`~skset.OTKEmbedding`, 0.5 for the supervised models) the
outputs agree with the estimator's to about 1e-6 relative; at ``epsilon=1e-3`` differences of
1e-5 to 1e-3 relative are expected (4.2e-4 was measured). This is accepted, not a defect: both are
float32 roundings of the same iterations, neither closer to the exact plan. For tighter agreement
fit the estimator with ``dtype="float64"``: its graph is float64 too. Exported with
``dynamo=False`` it agrees to 1e-12 or better (2.2e-15 measured on an :class:`~skset.OTKEmbedding`
of 40 iterations; 5.6e-8 with positions); the default exporter (``dynamo=True``) stores the OTK
code's Python constants (``epsilon``, ``log 3``) rounded to float32, which leaves its float64 OTK
graphs about 1e-7 from the estimator (1.2e-7 measured; the set networks' float64 graphs agree to
1e-13 with either exporter).

Features far from zero: the graph's input is float32, rounded before the estimator's
``input_offset_`` (:class:`~skset.OTKEmbedding`) or training mean (the supervised models) is
subtracted inside it, where ``transform`` subtracts it in float64 first. A spread of 1 at an
offset of 1e4 keeps about 1e-3 of its digits, and the outputs move with them: an
:class:`~skset.OTKEmbedding` of range 2.7 served 0.00034 from the same sets at 0 at an offset of
1,000, 0.0044 at 1e4 and 0.29 at 1e6 (``benchmarks/bench_offsets.py``). Subtract such an offset
before the graph, or export a ``dtype="float64"`` estimator, whose graph reads float64.

Element masses: the graph's inputs are ``(x, mask)`` only, so OTK's outputs are those of the
estimator with uniform element masses (``element_weight=None`` in ``predict`` / ``transform``); an
estimator fitted with ``element_weight`` exports as well, but the masses of the sets to serve cannot
be given. The unbalanced transport of ``reg_m`` is part of the graph.

Padding: the padded entries of ``x`` (``mask`` False) may hold anything, NaN and infinity
included; the graph replaces them by 0 (a select on the mask) before any arithmetic, so they
change no output.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ._serving import compute_dtype
from ._sets import check_sets, kmer_dilation, kmer_span, kmer_width, length_batches, pack

__all__ = ["serving_module", "export_program", "export_onnx", "pad_sets", "run_onnx"]

_SINKHORN_METHODS = ("log", "exp")


def _check_instance(estimator) -> None:
    if isinstance(estimator, type):
        raise TypeError(f"pass a fitted estimator instance, not the class {estimator.__name__} "
                        f"(e.g. {estimator.__name__}(...).fit(X)).")


def _output_names(estimator) -> list[str]:
    _check_instance(estimator)
    outputs = getattr(estimator, "_serving_outputs", None)
    if outputs is None:
        _unsupported(estimator)
    return list(outputs)


def _unsupported(estimator):
    raise TypeError(f"{type(estimator).__name__} cannot be exported; supported: the Set "
                    "Transformer, Deep Sets and supervised OTK estimators, OTKEmbedding, "
                    "NystromFeatures and DilatedKernelFeatures.")


def serving_module(estimator, *, sinkhorn_method: str = "log",
                   sinkhorn_iter: int | None = None) -> nn.Module:
    """The fitted ``estimator`` as one torch module ``forward(x, mask) -> tuple of outputs``.

    Parameters
    ----------
    estimator : fitted SetTransformerClassifier, SetTransformerRegressor, DeepSetsClassifier, \
DeepSetsRegressor, OTKClassifier, OTKRegressor, OTKEmbedding, NystromFeatures or \
DilatedKernelFeatures
        A copy of its network is taken (the estimator is untouched), in eval mode, on the CPU, in
        the estimator's dtype.
    sinkhorn_method : {"log", "exp"}, default="log"
        OTK only: the Sinkhorn domain of every set (see the module docstring).
    sinkhorn_iter : int or None, default=None
        OTK only: the fixed Sinkhorn iteration count; ``None`` takes the estimator's. Required
        for an :class:`~skset.OTKEmbedding` that stops at a tolerance (``sinkhorn_tol``).

    Returns
    -------
    torch.nn.Module
        ``forward(x (B, n, d), mask (B, n))`` returns the outputs listed in the module
        docstring, in that order, as a tuple. Every set needs at least one real element, its
        real elements first (a set shorter than a k-mer is one k-mer, as ``predict`` reads it).
    """
    if sinkhorn_method not in _SINKHORN_METHODS:
        raise ValueError(f"sinkhorn_method must be 'log' or 'exp', got {sinkhorn_method!r}")
    if sinkhorn_iter is not None and not (isinstance(sinkhorn_iter, (int, np.integer))
                                          and not isinstance(sinkhorn_iter, bool)
                                          and sinkhorn_iter >= 1):
        raise ValueError(f"sinkhorn_iter must be a positive integer or None, got {sinkhorn_iter!r}")
    _check_instance(estimator)
    builder = getattr(estimator, "_serving_module", None)
    if builder is None:
        _unsupported(estimator)
    module = builder(sinkhorn_method=sinkhorn_method, sinkhorn_iter=sinkhorn_iter)
    n = getattr(estimator, "n_features_in_", None)
    module.n_features = None if n is None else int(n)  # eager calls check it (check_width)
    return module.cpu().eval().requires_grad_(False)


def _min_elements(estimator) -> int:
    """The steps of one k-mer (``window``, or the span of dilated k-mers; 1 without k-mers)."""
    return kmer_span(kmer_width(estimator), kmer_dilation(estimator))


def _min_length(estimator) -> int:
    """The shortest padded length an exported model takes: the k-mers' span + 1 (``window + 1``
    for contiguous k-mers; the exported program assumes two k-mer rows or more: pad a batch of
    shortest sets further); real sets may be shorter, the mask says where they end."""
    w = _min_elements(estimator)
    return w + 1 if w > 1 else 1


def _example(estimator, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """A small padded batch (two sets of different sizes) to trace the module with."""
    n = _min_elements(estimator) + 3
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, n, int(estimator.n_features_in_), generator=g, dtype=dtype)
    mask = torch.arange(n) < torch.tensor([[n], [n - 1]])
    return x, mask


def _dynamic_shapes(estimator):
    batch = torch.export.Dim("batch", min=1)
    n = torch.export.Dim("n_elements", min=_min_length(estimator))
    return ({0: batch, 1: n}, {0: batch, 1: n})


def export_program(estimator, *, sinkhorn_method: str = "log",
                   sinkhorn_iter: int | None = None) -> torch.export.ExportedProgram:
    """The fitted ``estimator`` as a :func:`torch.export.export` program.

    The :func:`serving_module` exported with dynamic batch and set-size axes; run it with
    ``program.module()(x, mask)`` (torch tensors, e.g. from :func:`pad_sets`), save it with
    :func:`torch.export.save`. Parameters as in :func:`serving_module`.
    """
    module = serving_module(estimator, sinkhorn_method=sinkhorn_method,
                            sinkhorn_iter=sinkhorn_iter)
    dtype = compute_dtype(module)  # the sets' dtype (a regressor's output step is float64)
    return torch.export.export(module, _example(estimator, dtype),
                               dynamic_shapes=_dynamic_shapes(estimator))


def export_onnx(estimator, path, *, dynamo: bool = True, opset_version: int | None = None,
                sinkhorn_method: str = "log", sinkhorn_iter: int | None = None) -> Path:
    """Write the fitted ``estimator`` as an ONNX model (see :func:`~skset.export.serving_module`).

    The graph has two inputs, ``x`` ``(batch, n_elements, n_features_in_)`` in the estimator's
    dtype (float32 by default) and ``mask`` ``(batch, n_elements)`` boolean, both axes dynamic,
    and the outputs listed in the module docstring. The model's metadata hold the estimator's
    name and, for classifiers, ``classes_`` (JSON), which :func:`~skset.export.run_onnx` reads.

    Parameters
    ----------
    estimator : fitted estimator
        See :func:`~skset.export.serving_module`.
    path : str or path-like
        The ``.onnx`` file to write.
    dynamo : bool, default=True
        ``True``: the :func:`torch.export`-based exporter (torch's default since 2.9; needs
        ``onnxscript``). ``False``: the legacy TorchScript exporter, faster but deprecated;
        both take any batch and set size, k-mers included.
    opset_version : int or None, default=None
        ONNX opset; ``None`` takes the exporter's default.
    sinkhorn_method, sinkhorn_iter
        OTK only, see :func:`~skset.export.serving_module`.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    import onnx

    path = Path(path)
    kw = dict(input_names=["x", "mask"], output_names=_output_names(estimator),
              opset_version=opset_version)
    if dynamo:
        program = export_program(estimator, sinkhorn_method=sinkhorn_method,
                                 sinkhorn_iter=sinkhorn_iter)
        with warnings.catch_warnings():
            # the exporter warns that the second input reuses the first one's axis names
            warnings.filterwarnings("ignore", message=".*shares the same shape constraints")
            torch.onnx.export(program, dynamo=True, verbose=False, **kw).save(str(path))
    else:
        module = serving_module(estimator, sinkhorn_method=sinkhorn_method,
                                sinkhorn_iter=sinkhorn_iter)
        dtype = compute_dtype(module)
        axes = {"x": {0: "batch", 1: "n_elements"}, "mask": {0: "batch", 1: "n_elements"}}
        with warnings.catch_warnings():
            # the Python numbers the tracer freezes are fixed widths (supports, references,
            # embedding size), not set sizes: the set-size axis stays dynamic
            warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
            torch.onnx.export(module, _example(estimator, dtype), str(path), dynamo=False,
                              dynamic_axes=axes, **kw)
    model = onnx.load(str(path))
    meta = {"skset_estimator": type(estimator).__name__,
            "skset_min_length": str(_min_length(estimator))}
    if hasattr(estimator, "classes_"):
        with contextlib.suppress(TypeError):  # labels JSON cannot hold: predict_index only
            meta["skset_classes"] = json.dumps(np.asarray(estimator.classes_).tolist())
    onnx.helper.set_model_props(model, {**{p.key: p.value for p in model.metadata_props}, **meta})
    onnx.save(model, str(path))
    return path


def pad_sets(X, *, dtype=np.float32, n_max: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The padded inputs of an exported model: ``x (B, n_max, d)`` and ``mask (B, n_max)``.

    Each set's rows come first, padding is zeros, ``mask`` is ``True`` on real rows.

    Parameters
    ----------
    X : list of array-like of shape (n_i, d), or ndarray (n_sets, n, d)
    dtype : numpy dtype, default=np.float32
        The dtype of ``x`` (the model's input dtype: the estimator's).
    n_max : int or None, default=None
        Padded length; ``None``: the longest set.

    The sets are checked as the estimators check them (a ``ValueError`` names an empty set, one
    of other features, NaN or infinity; tensors are read on the host).
    """
    try:
        np_dtype = np.dtype(dtype)
    except TypeError:
        np_dtype = None
    if np_dtype not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64 (a model's input dtype), got {dtype!r}.")
    if n_max is not None and (isinstance(n_max, bool) or not isinstance(n_max, (int, np.integer))):
        raise ValueError(f"n_max must be an integer or None, got {n_max!r}.")
    # checked before the cast (1e40 is too large for float32, not infinite), then cast
    sets = [s.astype(np_dtype, copy=False) for s in check_sets(X, compute_dtype=np_dtype).sets]
    longest = max((len(s) for s in sets), default=0)
    if n_max is not None and n_max < longest:
        raise ValueError(f"n_max={n_max} is shorter than the longest set ({longest} elements); "
                         "give n_max >= it, or None for the longest set's length.")
    tdtype = torch.float64 if np_dtype == np.float64 else torch.float32
    x, mask = pack(sets, dtype=tdtype, n_max=n_max)
    return x.numpy(), mask.numpy()


def run_onnx(model, X, *, max_elements: int = 131072) -> dict:
    """Run an exported model with onnxruntime on a collection of sets.

    Parameters
    ----------
    model : str, path-like or onnxruntime.InferenceSession
        The file written by :func:`~skset.export_onnx`, or an ``InferenceSession`` on it.
    X : list of array-like of shape (n_i, d), or ndarray (n_sets, n, d)
        The sets, unstandardised (the model standardises them as the estimator does).
    max_elements : int, default=131072
        Budget of padded elements per run: sets are sorted by length and cut into batches.

    Returns
    -------
    dict
        ``{output name: array}`` with one row per set, in input order (see the module docstring);
        for a classifier also ``"predict"``, the labels ``classes_[predict_index]``; for
        :class:`~skset.NystromFeatures`, ``"transform"`` is a list of per-set arrays
        ``(max(1, n_i - (window - 1) * dilation), n_components_)`` (``n_i - window + 1``
        without dilation; a set shorter than a k-mer is one k-mer).
    """
    if isinstance(max_elements, bool) or not isinstance(max_elements, (int, np.integer)) \
            or max_elements < 1:
        raise ValueError(f"max_elements must be a positive integer, got {max_elements!r}")
    import onnxruntime as ort

    if not isinstance(model, ort.InferenceSession) and not Path(model).is_file():
        raise FileNotFoundError(f"run_onnx: no model file {str(model)!r}")
    session = model if isinstance(model, ort.InferenceSession) else ort.InferenceSession(
        str(model), providers=["CPUExecutionProvider"])
    dtype = np.float64 if session.get_inputs()[0].type == "tensor(double)" else np.float32
    names = [o.name for o in session.get_outputs()]
    d = session.get_inputs()[0].shape[-1]
    # the checks predict makes: sets of one dimension (the model's), not empty, finite
    sets = [s.astype(dtype, copy=False) for s in check_sets(
        X, compute_dtype=dtype, n_features=d if isinstance(d, int) else None).sets]
    lengths = np.fromiter((len(s) for s in sets), dtype=np.int64, count=len(sets))
    per_element = "transform_mask" in names
    meta = session.get_modelmeta().custom_metadata_map
    min_length = int(meta.get("skset_min_length", 1))
    out: dict = {}
    tdtype = torch.float64 if dtype == np.float64 else torch.float32
    for idx in length_batches(lengths, max_elements=max_elements):
        # packed as pad_sets packs them, without checking the sets again
        x, mask = pack([sets[i] for i in idx], dtype=tdtype,
                       n_max=max(min_length, int(lengths[idx].max())))
        res = dict(zip(names, session.run(None, {"x": x.numpy(), "mask": mask.numpy()})))
        if per_element:  # each set's real rows: one gather for the batch, one view a set
            feats = out.setdefault("transform", [None] * len(sets))
            keep = res["transform_mask"]
            rows = res["transform"][keep]
            ends = np.cumsum(keep.sum(1)).tolist()
            for i, a, b in zip(idx, [0, *ends[:-1]], ends, strict=True):
                feats[i] = rows[a:b]
            continue
        for name, value in res.items():
            if name not in out:
                out[name] = np.empty((len(sets),) + value.shape[1:], dtype=value.dtype)
            out[name][idx] = value
    if "skset_classes" in meta and "predict_index" in out:
        out["predict"] = np.asarray(json.loads(meta["skset_classes"]))[out["predict_index"]]
    return out
