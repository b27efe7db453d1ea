"""Past one machine: a fitted skset estimator applied to sets stored on a dask cluster
(:func:`transform`), and an estimator fitted on them chunk by chunk (:func:`fit`).

``pip install skset[dask]``. The sets live in a dask DataFrame in long format (one row per element,
a set-id column; what :func:`skset.sets_from_frame` reads) or in a dask Bag of ``(n_i, d)``
arrays. :func:`transform` applies a fitted estimator partition by partition and returns a lazy
dask DataFrame indexed by set id, with named columns, that can be computed, joined or written to
parquet (``.to_parquet(path)``) without ever collecting the sets on the client.

What is sent where:

* the fitted estimator goes into the task graph **once**, as one key that every partition's task
  depends on: each worker receives it once and keeps it for all its partitions (with a
  ``distributed`` client, ``client.scatter(estimator, broadcast=True)`` may be passed instead as
  ``estimator``: the same, sent ahead of the graph);
* the rows of one set may lie in several partitions of a DataFrame: they are co-located first by
  a shuffle on the id column (all-to-all traffic, about the size of the data once). When the
  frame is already partitioned by set (every set's rows in one partition, e.g. written by set or
  read from parquet files of whole sets), pass ``partitioned=True`` and the shuffle is skipped;
* each partition's sets are transformed on its worker with the estimator's own batching, bounded
  by its element budget (``max_elements``), so a worker's memory grows with its partition, never
  with the whole collection.

:func:`fit` goes the other way: the estimator stays on the client and the partitions come to it,
one at a time (the next one computed on the cluster while the current one is learned from, with
a ``distributed`` client), each fed into ``partial_fit`` (:func:`skset.utils.partial_fit`: through
every step of a ``Pipeline``). The client holds at most two partitions, never the collection.

The package is split in two: :mod:`._partitions` turns one partition into sets and labels and the
estimator's output back into a frame (pandas and numpy only: what a Ray or Spark driver would
reuse), and :mod:`._dask`, the only module of skset that imports dask, moves the partitions and
the estimator.
"""

from __future__ import annotations

from . import _dask
from ._dask import fit, transform, worker_allocator  # noqa: F401

#: The allocator settings :func:`worker_allocator` gives the worker processes, as a dict of
#: environment variables: ``MALLOC_ARENA_MAX=1`` (one arena), ``MALLOC_MMAP_THRESHOLD_`` 32 MiB
#: (temporaries below it come from the heap) and ``MALLOC_TRIM_THRESHOLD_`` 256 MiB (freed memory
#: above it goes back to the system), read by glibc's malloc. The same dict as the one
#: :func:`worker_allocator` reads.
WORKER_ALLOCATOR = _dask.WORKER_ALLOCATOR

__all__ = ["fit", "transform", "worker_allocator"]
