"""Where ``skset.distributed.transform``'s per-worker throughput goes (issue 24): the README
pipeline of ``bench_scale.py`` (fitted on 2,000 sets) on its generated sets, one torch thread.

* ``partition``: one process, no dask: the in-process path (generate sets, ``iter_transform``)
  against the frame path of a partition (generate the long table, ``sets_from_frame``,
  transform, write parquet), 4 partitions of 5,000 sets;
* ``schedulers``: the same lazy ``distributed.transform`` of 8 partitions computed by dask's
  synchronous scheduler and by a 1-worker ``LocalCluster``, beside the in-process path;
* ``stream``: dask's task stream of that 1-worker run (busy time per task kind);
* ``worker``: the in-process loop (20,000 sets) run in the main process, then as a dask task on
  a 1-worker ``LocalCluster`` (``--mmap N`` adds ``MALLOC_MMAP_THRESHOLD_=N`` to the workers'
  environment, ``--env KEY=VALUE ...`` any other variables), with the worker's CPU time over
  wall time;
* ``spawn``: the in-process loop in a fresh ``spawn``-ed process (the pipeline unpickled there);
* ``thread``: the in-process loop in a ``ThreadPoolExecutor`` thread of the main process;
* ``cpu``: ``distributed.transform`` of 20 partitions on a 2-worker ``LocalCluster`` (under
  ``skset.distributed.worker_allocator()``), with the CPU time of each process (the client,
  which holds the scheduler and the nannies, and each worker) over the wall time (psutil).

    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_scale_diagnose.py partition
    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_scale_diagnose.py worker
    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_scale_diagnose.py worker --mmap 33554432
    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_scale_diagnose.py worker --mmap 33554432 \
        --env MALLOC_TRIM_THRESHOLD_=268435456 MALLOC_ARENA_MAX=1
    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_scale_diagnose.py cpu
"""

from __future__ import annotations

import argparse
import os
import pickle
import resource
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parent))

N_LOOP = 20_000


def _loop(pipe, n=N_LOOP):
    """Sets/s of ``bench_scale.in_process`` and the process's CPU time over wall time."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_scale as B
    import torch

    torch.set_num_threads(1)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    c0, t0 = time.process_time(), time.perf_counter()
    rate = B.in_process(pipe, n)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    faults = {"sys": (r1.ru_stime - r0.ru_stime) / wall, "minor_faults": r1.ru_minflt - r0.ru_minflt}
    return rate, (time.process_time() - c0) / wall, faults


def _loop_unpickled(blob):
    return _loop(pickle.loads(blob))[:2]


def partition(pipe, B):
    import numpy as np
    import pandas as pd

    from skset._frames import sets_from_frame
    from skset.utils import iter_transform

    T = {}

    def timed(key, f):
        t = time.perf_counter()
        out = f()
        T[key] = T.get(key, 0.0) + time.perf_counter() - t
        return out

    def run(sets):
        return list(iter_transform(pipe, sets, chunk_size=1024, method="predict_proba"))

    for part in range(4):
        sets, _ = timed("in-process: generate sets", lambda p=part: B.make_sets(1000 + p, 5000))
        timed("in-process: transform", lambda s=sets: run(s))
        pdf = timed("frame: generate the long table", lambda p=part: B.make_partition(p))
        sets, ids = timed("frame: sets_from_frame", lambda f=pdf: sets_from_frame(f, by="sid"))
        out = timed("frame: transform", lambda s=sets: run(s))

        def write(out=out, ids=ids):
            frame = pd.DataFrame(np.concatenate(out), index=pd.Index(ids, name="sid"))
            frame.columns = [str(c) for c in frame.columns]
            frame.to_parquet(tempfile.mkdtemp() + "/part.parquet")

        timed("frame: write parquet", write)
    ours = sum(v for k, v in T.items() if k.startswith("in-process"))
    frame = sum(v for k, v in T.items() if k.startswith("frame"))
    for k, v in T.items():
        print(f"  {k}: {v:.2f} s")
    print(f"frame path / in-process path (rate): {ours / frame:.2f}")


def schedulers(pipe, B, stream=False):
    import dask
    import dask.dataframe as dd
    from distributed import Client, LocalCluster, get_task_stream

    import skset.distributed as sd

    n = 8
    print(f"in-process {B.in_process(pipe, n * B.PER_PARTITION):.0f} sets/s")
    lazy = sd.transform(pipe, dd.from_map(B.make_partition, list(range(n))), by="sid",
                        method="predict_proba", partitioned=True)
    with dask.config.set(scheduler="synchronous"):
        t = time.perf_counter()
        lazy.compute()
        print(f"dask synchronous {n * B.PER_PARTITION / (time.perf_counter() - t):.0f} sets/s")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.run(lambda: __import__("torch").set_num_threads(1))
        lazy.head(1)  # warm-up: imports and first calls in the worker
        with get_task_stream(client) as ts:
            t = time.perf_counter()
            lazy.compute()
            wall = time.perf_counter() - t
        print(f"distributed, 1 worker {n * B.PER_PARTITION / wall:.0f} sets/s")
        if stream:
            busy = {}
            for r in ts.data:
                name = (r["key"][0] if isinstance(r["key"], tuple) else str(r["key"])).split("-")[0]
                for s in r["startstops"]:
                    busy[name] = busy.get(name, 0.0) + s["stop"] - s["start"]
            print(f"task stream: wall {wall:.2f} s, worker busy {sum(busy.values()):.2f} s")
            for k, v in sorted(busy.items(), key=lambda kv: -kv[1])[:5]:
                print(f"  {k}: {v:.2f} s")


def worker(pipe, mmap, env=()):
    import dask
    from distributed import Client, LocalCluster

    if mmap:
        dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_": mmap})
    for item in env:
        key, value = item.split("=", 1)
        dask.config.set({f"distributed.nanny.pre-spawn-environ.{key}": value})
    print("workers' environment:", dask.config.get("distributed.nanny.pre-spawn-environ"))
    rate, cpu, more = _loop(pipe)
    print(f"main process: {rate:.0f} sets/s (CPU/wall {cpu:.2f}; system time / wall "
          f"{more['sys']:.2f}, minor page faults {more['minor_faults']:,})")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        fut = client.scatter(pipe)
        for _ in range(2):
            rate, cpu, more = client.submit(_loop, fut, pure=False).result()
            print(f"dask task: {rate:.0f} sets/s (worker CPU/wall {cpu:.2f}; system time / wall "
                  f"{more['sys']:.2f}, minor page faults {more['minor_faults']:,})")


def cpu_split(pipe, B, n_parts=20):
    import tempfile

    import dask.dataframe as dd
    import psutil
    from distributed import Client, LocalCluster

    import skset.distributed as sd

    with sd.worker_allocator(), LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                              dashboard_address=None, memory_limit="6GiB") as cluster, \
            Client(cluster) as client:
        client.run(lambda: __import__("torch").set_num_threads(1))
        warm = dd.from_map(B.make_partition, [0, 1], n=50)
        sd.transform(pipe, warm, by="sid", method="predict_proba", partitioned=True).compute()
        me = psutil.Process()
        procs = [me] + me.children(recursive=True)
        workers = set(client.run(os.getpid).values())
        lazy = sd.transform(pipe, dd.from_map(B.make_partition, list(range(n_parts))), by="sid",
                            method="predict_proba", partitioned=True)
        before = {p.pid: sum(p.cpu_times()[:2]) for p in procs}
        t = time.perf_counter()
        lazy.to_parquet(tempfile.mkdtemp())
        wall = time.perf_counter() - t
        for p in procs:
            used = sum(p.cpu_times()[:2]) - before[p.pid]
            kind = ("worker" if p.pid in workers else
                    "client (scheduler, nannies)" if p.pid == me.pid else p.name())
            print(f"{kind}: {used:.2f} s CPU over {wall:.2f} s wall = {used / wall:.2f} of a core")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["partition", "schedulers", "stream", "worker", "spawn",
                                     "thread", "cpu"])
    ap.add_argument("--mmap", type=int, default=None, metavar="BYTES")
    ap.add_argument("--env", nargs="+", default=(), metavar="KEY=VALUE",
                    help="more variables of the workers' environment (worker mode)")
    args = ap.parse_args()
    import bench_scale as B
    import torch

    torch.set_num_threads(1)
    pipe = B.fitted_pipeline()
    if args.mode == "partition":
        partition(pipe, B)
    elif args.mode in ("schedulers", "stream"):
        schedulers(pipe, B, stream=args.mode == "stream")
    elif args.mode == "cpu":
        cpu_split(pipe, B)
    elif args.mode == "worker":
        worker(pipe, args.mmap, args.env)
    elif args.mode == "spawn":
        import multiprocessing as mp

        print(f"main process: {_loop(pipe)[0]:.0f} sets/s")
        with mp.get_context("spawn").Pool(1) as pool:
            rate = pool.apply(_loop_unpickled, (pickle.dumps(pipe),))[0]
        print(f"spawned process: {rate:.0f} sets/s")
    else:
        from concurrent.futures import ThreadPoolExecutor

        print(f"main thread: {_loop(pipe)[0]:.0f} sets/s")
        with ThreadPoolExecutor(1) as ex:
            print(f"pool thread: {ex.submit(_loop, pipe).result()[0]:.0f} sets/s")
        print(f"main thread: {_loop(pipe)[0]:.0f} sets/s")


if __name__ == "__main__":
    main()
