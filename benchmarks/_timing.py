"""Timing shared by the benchmark scripts (numpy and the standard library only: a script may
import it before choosing which skset checkout to import)."""

import time

import numpy as np


def interleaved(fns: dict, repeats: int) -> dict:
    """Median seconds of each callable over ``repeats`` rounds, every round running all of them
    (each called once first, outside the timing: warm-up and any compilation)."""
    times = {k: [] for k in fns}
    for f in fns.values():
        f()
    for _ in range(repeats):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return {k: float(np.median(v)) for k, v in times.items()}
