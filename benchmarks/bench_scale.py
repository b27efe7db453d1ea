"""Issue 24: the README pipeline over many sets on a dask cluster, beside one in-process core.

Sets of 10-100 elements of 16 features, in long format (one row per element, a set-id column),
are generated **on the workers** (``dd.from_map``: each partition makes its own sets from its
seed; the client never holds them). A ``Pipeline([NystromFeatures(), OTKEmbedding(),
LogisticRegression()])`` fitted in memory on 2,000 sets of the same kind is applied to all of
them with :func:`skset.distributed.transform` (``method="predict_proba"``, partitions are whole
sets: ``partitioned=True``) on a ``LocalCluster`` of worker processes with one thread each, and
the result written to parquet. Beside it, in the same run, the same pipeline on the same number
of sets in this process on one thread with :func:`skset.utils.iter_transform` (sets generated
chunk by chunk with the same generator).

The workers start under :func:`skset.distributed.worker_allocator` (``--dask-malloc``: dask's
own allocator setting; ``--mmap-only``: the earlier fix, ``MALLOC_MMAP_THRESHOLD_`` alone).

Reported: sets/s of each (the cluster's per worker), the ratio (target >= 0.8x per worker), peak
resident memory of the client and of each worker process (``ru_maxrss``), for each size given.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_scale.py --sets 100000 1000000 --workers 2

``--fit``: the other way, the pipeline with ``SGDClassifier(loss="log_loss")`` **fitted** on the
sets with :func:`skset.distributed.fit` (one epoch; the partitions generated on the workers and
brought to the client one at a time), beside the same stream of partitions generated and fed to
:func:`skset.utils.partial_fit` in this process; the sizes in increasing order, the client's peak
memory after each cluster fit (all cluster fits run before the in-process ones).

    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_scale.py --fit --sets 10000 100000 --workers 2
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

D = 16
PER_PARTITION = 5_000


def _draw(seed: int, n: int):
    """All the elements of ``n`` sets in one ``(total, D)`` float32 array, the sets' sizes
    (10-100) and labels: element rows ~ N(0.3 * label, 1), drawn at once."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(10, 101, n)
    y = rng.integers(0, 2, n)
    flat = rng.standard_normal((int(sizes.sum()), D), dtype=np.float32)
    flat += np.repeat(0.3 * y, sizes).astype(np.float32)[:, None]
    return flat, sizes, y


def make_sets(seed: int, n: int):
    """``n`` sets (10-100 elements, ``D`` features) and their labels, from ``seed``."""
    flat, sizes, y = _draw(seed, n)
    ends = np.cumsum(sizes).tolist()
    return [flat[a:b] for a, b in zip([0, *ends[:-1]], ends)], y


def make_partition(part: int, n: int = PER_PARTITION) -> pd.DataFrame:
    """One partition of the long table: the sets of seed ``1000 + part`` (the same as
    ``make_sets(1000 + part, n)``), ids unique."""
    flat, sizes, _ = _draw(1000 + part, n)
    frame = pd.DataFrame(flat, columns=[f"f{j}" for j in range(D)], copy=False)
    frame.insert(0, "sid", np.repeat(part * n + np.arange(n), sizes))
    return frame


def fitted_pipeline():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline

    from skset import NystromFeatures, OTKEmbedding

    sets, y = make_sets(0, 2000)
    return Pipeline([("nys", NystromFeatures(random_state=0)),
                     ("otk", OTKEmbedding(random_state=0)),
                     ("clf", LogisticRegression(max_iter=1000))]).fit(sets, y)


def maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def in_process(pipe, n_sets: int) -> float:
    """Sets/s of iter_transform on this process's one thread."""
    import torch

    from skset.utils import iter_transform

    torch.set_num_threads(1)
    n_parts = n_sets // PER_PARTITION
    t = time.perf_counter()
    done = 0
    for part in range(n_parts):
        sets, _ = make_sets(1000 + part, PER_PARTITION)
        for out in iter_transform(pipe, sets, chunk_size=1024, method="predict_proba"):
            done += len(out)
    return done / (time.perf_counter() - t)


def on_cluster(pipe, n_sets: int, workers: int, out_dir: str) -> tuple[float, list[float]]:
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    import skset.distributed as sd

    n_parts = n_sets // PER_PARTITION
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None, memory_limit="6GiB") as cluster, \
            Client(cluster) as client:
        client.run(lambda: __import__("torch").set_num_threads(1))
        # warm-up, not timed: imports in the worker processes and one small partition each
        warm = dd.from_map(make_partition, list(range(workers)), n=50)
        sd.transform(pipe, warm, by="sid", method="predict_proba", partitioned=True).compute()
        ddf = dd.from_map(make_partition, list(range(n_parts)))
        lazy = sd.transform(pipe, ddf, by="sid", method="predict_proba", partitioned=True)
        t = time.perf_counter()
        lazy.to_parquet(out_dir)
        rate = n_sets / (time.perf_counter() - t)
        rss = client.run(lambda: __import__("resource").getrusage(
            __import__("resource").RUSAGE_SELF).ru_maxrss / 1024)
    return rate, sorted(rss.values())


def stream_pipeline():
    from sklearn.linear_model import SGDClassifier
    from sklearn.pipeline import Pipeline

    from skset import NystromFeatures, OTKEmbedding

    return Pipeline([("nys", NystromFeatures(random_state=0)), ("otk", OTKEmbedding(random_state=0)),
                     ("clf", SGDClassifier(loss="log_loss", random_state=0))])


def make_labelled_partition(part: int, n: int = PER_PARTITION) -> pd.DataFrame:
    """:func:`make_partition` with each set's label as a column (constant within the set)."""
    frame = make_partition(part, n)
    _, sizes, y = _draw(1000 + part, n)
    frame["label"] = np.repeat(y, sizes)
    return frame


def fit_on_cluster(n_sets: int, workers: int):
    """``(sets/s, fitted pipeline)`` of ``skset.distributed.fit`` over the generated sets."""
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    import skset.distributed as sd

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None, memory_limit="6GiB") as cluster, \
            Client(cluster) as client:
        client.run(lambda: __import__("torch").set_num_threads(1))
        client.submit(make_labelled_partition, 0, 10).result()  # warm-up: imports on a worker
        ddf = dd.from_map(make_labelled_partition, list(range(n_sets // PER_PARTITION)))
        t = time.perf_counter()
        pipe = sd.fit(stream_pipeline(), ddf, by="sid", y="label", classes=[0, 1],
                      partitioned=True)
        return n_sets / (time.perf_counter() - t), pipe


def fit_in_process(n_sets: int) -> float:
    """Sets/s of the same stream of partitions made here and fed to utils.partial_fit."""
    from skset.utils import partial_fit

    pipe, t = stream_pipeline(), time.perf_counter()
    for part in range(n_sets // PER_PARTITION):
        sets, y = make_sets(1000 + part, PER_PARTITION)
        partial_fit(pipe, sets, y, classes=[0, 1])
    return n_sets / (time.perf_counter() - t)


def main_fit(args):
    import torch

    torch.set_num_threads(1)
    test_sets, test_y = make_sets(1, 2000)
    rows = []
    for n in sorted(args.sets):
        rate, pipe = fit_on_cluster(n, args.workers)
        rows.append((n, rate, maxrss_mb(), pipe.score(test_sets, test_y)))
        print(f"cluster fit of {n:,} sets: {rate:,.0f} sets/s, client peak RSS "
              f"{rows[-1][2]:.0f} MB, accuracy on 2,000 held-out sets {rows[-1][3]:.3f}",
              flush=True)
    print("| sets | distributed.fit (sets/s) | in-process partial_fit, 1 thread (sets/s) | ratio "
          "| client peak RSS after the cluster fit (MB) | held-out accuracy |")
    print("|---|---|---|---|---|---|")
    for n, rate, rss, acc in rows:
        single = fit_in_process(n)
        print(f"| {n:,} | {rate:,.0f} | {single:,.0f} | {rate / single:.2f} | {rss:.0f} | "
              f"{acc:.3f} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", nargs="+", type=int, default=[100_000])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--fit", action="store_true", help="fit with skset.distributed.fit")
    ap.add_argument("--dask-malloc", action="store_true",
                    help="leave the workers' allocator as dask sets it (MALLOC_TRIM_THRESHOLD_ "
                         "only); by default skset.distributed.worker_allocator() is called")
    ap.add_argument("--mmap-only", action="store_true",
                    help="the earlier setting: only MALLOC_MMAP_THRESHOLD_=32 MiB added to dask's")
    args = ap.parse_args()
    if args.mmap_only:
        import dask

        dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_": 1 << 25})
    elif not args.dask_malloc:
        import skset.distributed as sd

        # dask's nanny starts workers with MALLOC_TRIM_THRESHOLD_=65536: temporaries mapped and
        # unmapped again, page faults on each (see skset.distributed.worker_allocator)
        sd.worker_allocator()
    if args.fit:
        return main_fit(args)
    pipe = fitted_pipeline()
    print(f"pipeline fitted on 2,000 sets; client peak RSS {maxrss_mb():.0f} MB")
    print("| sets | in-process, 1 thread (sets/s) | cluster, "
          f"{args.workers} workers (sets/s) | per worker / in-process | client peak RSS (MB) "
          "| worker peak RSS (MB) |")
    print("|---|---|---|---|---|---|")
    for n in args.sets:
        out_dir = tempfile.mkdtemp(prefix="skset_scale_")
        try:
            rate, rss = on_cluster(pipe, n, args.workers, out_dir)
            n_rows = len(pd.read_parquet(out_dir, columns=["proba_0"]))
        finally:
            shutil.rmtree(out_dir, ignore_errors=True)
        assert n_rows == n, (n_rows, n)
        client_rss = maxrss_mb()  # before the in-process run, which makes its sets here
        single = in_process(pipe, n)
        print(f"| {n:,} | {single:,.0f} | {rate:,.0f} | {rate / args.workers / single:.2f} | "
              f"{client_rss:.0f} | {', '.join(f'{r:.0f}' for r in rss)} |", flush=True)


if __name__ == "__main__":
    main()
