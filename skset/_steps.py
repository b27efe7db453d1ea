"""The steps of an estimator or a ``Pipeline``, and what each step declares.

Shared by :func:`skset.utils.partial_fit` (one chunk through every step) and
:mod:`skset.distributed` (partitions of sets on a cluster): the steps that count (``None`` and
``"passthrough"`` left out), the first and final one, the check that every step can learn from
chunks (it has ``partial_fit``), and what one row of an estimator's output describes (its
``_output_rows``: ``"set"``, the default, or ``"element"``, as ``NystromFeatures``'s per-element
map). Nothing here imports an estimator module: an estimator says what it is by its attributes.
"""

from __future__ import annotations

__all__ = ["first_step", "final_step", "output_rows", "partial_fit_steps", "pipeline_steps"]


def pipeline_steps(estimator) -> list:
    """``[(name, step), ...]`` of a pipeline (``None`` and ``"passthrough"`` steps left out), or
    ``[("", estimator)]``."""
    steps = list(estimator.steps) if hasattr(estimator, "steps") else [("", estimator)]
    return [(n, s) for n, s in steps
            if s is not None and not (isinstance(s, str) and s == "passthrough")]


def first_step(estimator):
    """The first step of a pipeline (``passthrough`` steps left out), or the estimator."""
    steps = pipeline_steps(estimator)
    return steps[0][1] if steps else estimator


def final_step(estimator):
    """The final step of a pipeline (``passthrough`` steps left out), or the estimator."""
    steps = pipeline_steps(estimator)
    return steps[-1][1] if steps else estimator


def output_rows(estimator) -> str:
    """What one row of the output of ``estimator`` (or of a pipeline's final step) describes:
    ``"set"`` (one row per set) or ``"element"`` (one row per element of each set), as the
    estimator's class declares it in ``_output_rows``; ``"set"`` for estimators that declare
    nothing (scikit-learn's, which take one row per set after a set-level step)."""
    return getattr(final_step(estimator), "_output_rows", "set")


def partial_fit_steps(estimator) -> list:
    """``[(name, step), ...]`` of a pipeline (``passthrough`` steps left out) or ``[("",
    estimator)]``; a ``TypeError`` names the first step without ``partial_fit`` (it cannot
    learn from chunks)."""
    steps = pipeline_steps(estimator)
    if not steps:
        raise TypeError("the pipeline has no step to fit.")
    for name, step in steps:
        if not hasattr(step, "partial_fit"):
            where = f"step {name!r} ({type(step).__name__})" if name else type(step).__name__
            raise TypeError(f"{where} has no partial_fit, so it cannot learn from chunks; use an "
                            "estimator that has one (e.g. SGDClassifier(loss='log_loss') instead "
                            "of LogisticRegression), or fit it on a sample of the data.")
    return steps
