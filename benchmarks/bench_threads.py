"""skset's thread policy (issue 37): the default against one and two threads, on an idle machine
and beside busy background processes, side by side in one run.

Workloads, each run in a fresh subprocess with the thread setting in its environment:

* ``main``: the README main job (``examples/japanese_vowels_otk.py``: NystromFeatures ->
  OTKEmbedding -> LogisticRegression, GridSearchCV over 9 cells x 3 folds, refit, test score),
  the grid search + refit + score time;
* ``otk_s1`` / ``otk_s3``: ``OTKEmbedding.transform`` on S1 (512 sets x 100 elements x 128
  features) and S3 (512 sets of 50..1000 elements x 128), 64 supports, epsilon 0.5, 10
  iterations (the shapes of ``bench_peers.py``), median of 3 calls after one warm-up;
* ``st_epoch``: one epoch of ``SetTransformerRegressor`` (defaults, ``max_iter=1``) on 512 sets of
  50..300 elements x 8 features, the ``fit`` time;
* ``abc``: ``ABCClusterer(max_steps=200)`` fitted on 200 circle instances of 100 points.

Settings: ``default`` (no thread variable: ``skset.set_config(n_threads="auto")``), ``one``
(``OMP_NUM_THREADS=1 SKSET_NUM_THREADS=1``) and ``two`` (``OMP_NUM_THREADS=2
SKSET_NUM_THREADS=2``); every run has ``OMP_WAIT_POLICY=PASSIVE``. Conditions: ``idle`` (nothing
started by the script) and ``busy`` (two pure-Python busy loops that the script starts, lets the
CPU pressure settle for ``--settle`` seconds, and ends after the workloads). The settings of one
workload run one after the other in each round (``--repeats`` rounds, the median kept), so they
see the same minutes of the machine. Each run prints a digest of its result (the pipeline's test
probabilities, the embedding, the network's predictions, the labels): the table says which
settings gave bit-identical results.

    OMP_WAIT_POLICY=PASSIVE nice -n 10 python benchmarks/bench_threads.py \\
        --out benchmarks/results/threads.md                  # both conditions, every workload
    python benchmarks/bench_threads.py --idle-only --out ...  # on a quiet machine
    python benchmarks/bench_threads.py --busy-only --workloads main otk_s1
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's skset, in the driver as in the workers
WORKLOADS = ("main", "otk_s1", "otk_s3", "st_epoch", "abc")
SETTINGS = {
    "default": {},
    "one": {"OMP_NUM_THREADS": "1", "SKSET_NUM_THREADS": "1"},
    "two": {"OMP_NUM_THREADS": "2", "SKSET_NUM_THREADS": "2"},
}
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "SKSET_NUM_THREADS")


# -- the workloads (run inside a subprocess) -------------------------------------------------------
def _digest(a) -> str:
    import numpy as np

    if isinstance(a, list):
        a = np.concatenate([np.ravel(x) for x in a])
    return hashlib.sha1(np.ascontiguousarray(a).tobytes()).hexdigest()[:12]


def worker(name: str) -> dict:
    import numpy as np

    warnings.filterwarnings("ignore")
    if name == "main":
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import GridSearchCV
        from sklearn.pipeline import Pipeline

        from skset import NystromFeatures, OTKEmbedding
        from skset.datasets import load_japanese_vowels

        # examples/japanese_vowels_otk.py's pipeline and grid, written out here to read the
        # refitted model's probabilities
        X, y = load_japanese_vowels(subset="train", return_X_y=True)
        Xt, yt = load_japanese_vowels(subset="test", return_X_y=True)
        pipe = Pipeline([("nystrom", NystromFeatures(random_state=0)),
                         ("otk", OTKEmbedding(random_state=0)),
                         ("clf", LogisticRegression(max_iter=2000))])
        search = GridSearchCV(pipe, {"otk__epsilon": [0.1, 0.5, 1.0],
                                     "otk__n_supports": [5, 10, 20]}, cv=3)
        t = time.perf_counter()
        search.fit(X, y)
        acc = search.score(Xt, yt)
        seconds = time.perf_counter() - t
        return {"seconds": seconds, "digest": _digest(search.predict_proba(Xt)),
                "note": f"accuracy {acc:.4f}"}
    if name in ("otk_s1", "otk_s3"):
        from bench_peers import make_sets  # the sets of bench_peers.py's S1 / S3

        from skset import OTKEmbedding

        rng = np.random.default_rng(0)
        lengths = [100] * 512 if name == "otk_s1" else rng.integers(50, 1001, 512)
        sets = make_sets(rng, lengths, 128)
        est = OTKEmbedding(n_supports=64, epsilon=0.5, sinkhorn_iter=10, sinkhorn_tol=None,
                           center=False, normalize=False, max_samples=20_000, random_state=0,
                           device="cpu").fit(sets[:200])
        out = est.transform(sets)  # warm-up
        times = []
        for _ in range(3):
            t = time.perf_counter()
            est.transform(sets)
            times.append(time.perf_counter() - t)
        return {"seconds": statistics.median(times), "digest": _digest(out),
                "note": f"fit {_digest(est.references_ if hasattr(est, 'references_') else 0)}"}
    if name == "st_epoch":
        from skset import SetTransformerRegressor

        rng = np.random.default_rng(0)
        sets = [rng.normal(size=(int(n), 8)).astype(np.float32)
                for n in rng.integers(50, 301, 512)]
        y = np.array([s[:, 0].mean() + s[:, 1].std() for s in sets])
        est = SetTransformerRegressor(max_iter=1, random_state=0, device="cpu")
        t = time.perf_counter()
        est.fit(sets, y)
        seconds = time.perf_counter() - t
        return {"seconds": seconds, "digest": _digest(est.predict(sets)), "note": ""}
    if name == "abc":
        from skset import ABCClusterer
        from skset.datasets import make_circles_instances

        X, y = make_circles_instances(200, 100, n_circles=(2, 5), random_state=0)
        est = ABCClusterer(max_steps=200, eval_every=100, warmup_fraction=0.0, random_state=0,
                           device="cpu")
        t = time.perf_counter()
        est.fit(X, y)
        seconds = time.perf_counter() - t
        return {"seconds": seconds, "digest": _digest([np.asarray(v) for v in est.predict(X[:16])]),
                "note": f"{est.n_iter_} steps"}
    raise ValueError(name)


def scope_overhead() -> str:
    """Cost of entering and leaving the policy's scope (what every skset call pays)."""
    import torch

    from skset._threads import call_scope

    out = []
    for work, label in ((10.0, "small call (torch kept at one thread)"),
                        (1e12, "large call (torch at the usable cores)")):
        for _ in range(100):
            with call_scope(work):
                pass
        t = time.perf_counter()
        n = 2000
        for _ in range(n):
            with call_scope(work):
                pass
        out.append(f"{label}: {(time.perf_counter() - t) / n * 1e6:.0f} us")
    return f"{'; '.join(out)} (torch {torch.get_num_threads()} threads)"


# -- the driver --------------------------------------------------------------------------------------
def run_one(name: str, setting: str, timeout: float) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    env.update(SETTINGS[setting])
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    t = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, __file__, "--worker", name], env=env,
                              capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"seconds": float("nan"), "digest": "timeout", "note": f"over {timeout:.0f} s",
                "wall": time.perf_counter() - t}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{name} / {setting} failed:\n{proc.stderr[-3000:]}")
    res = json.loads(lines[-1])
    res["wall"] = time.perf_counter() - t
    return res


def start_load(n: int) -> list:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def stop_load(procs: list) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait()


def pressure() -> str:
    try:
        with open("/proc/pressure/cpu") as fh:
            return fh.readline().split("avg10=")[1].split()[0] + "%"
    except (OSError, IndexError):
        return "-"


def condition(label: str, args, lines: list, log) -> dict:
    procs = start_load(args.busy_processes) if label == "busy" else []
    results = {}
    try:
        if procs:
            time.sleep(args.settle)
        load0, p0 = os.getloadavg(), pressure()
        t0 = time.perf_counter()
        for name in args.workloads:
            for rnd in range(args.repeats):
                for setting in SETTINGS:
                    r = run_one(name, setting, args.timeout)
                    results.setdefault((name, setting), []).append(r)
                    log(f"{label} {name} {setting} round {rnd}: {r['seconds']:.2f} s "
                        f"({r['wall']:.0f} s with start-up), {r['digest']} {r['note']}")
        load1, p1 = os.getloadavg(), pressure()
        minutes = (time.perf_counter() - t0) / 60
    finally:
        stop_load(procs)
    lines.append(f"\n### {label}" + (f": {args.busy_processes} busy background processes"
                                       if procs else ": no background process started") + "\n")
    lines.append(f"Load average (1, 5, 15 min) {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} at "
                 f"the start, {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} at the end; CPU "
                 f"pressure some avg10 {p0} / {p1}; {minutes:.1f} min.\n")
    lines.append("| workload | default (s) | one thread (s) | two threads (s) | default / one | "
                 "default / best of one and two | results |")
    lines.append("|---|---|---|---|---|---|---|")
    for name in args.workloads:
        med = {s: statistics.median(r["seconds"] for r in results[(name, s)]) for s in SETTINGS}
        digests = {s: {r["digest"] for r in results[(name, s)]} for s in SETTINGS}
        same = [s for s in SETTINGS if digests[s] == digests["default"]]
        if len(same) == len(SETTINGS):
            res = "bit-identical in all three"
        else:
            res = "default = " + (" = ".join(same[1:]) if len(same) > 1 else "neither") + \
                "; " + ", ".join(f"{s} {'/'.join(sorted(d))}" for s, d in digests.items())
        note = results[(name, "default")][0]["note"]
        best = min(med["one"], med["two"])
        lines.append(f"| {name}{' (' + note + ')' if note and name == 'main' else ''} | "
                     f"{med['default']:.2f} | {med['one']:.2f} | {med['two']:.2f} | "
                     f"{med['default'] / med['one']:.2f} | {med['default'] / best:.2f} | {res} |")
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", choices=WORKLOADS, help=argparse.SUPPRESS)
    ap.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--idle-only", action="store_true")
    g.add_argument("--busy-only", action="store_true")
    ap.add_argument("--repeats", type=int, default=1, help="rounds per workload (median kept)")
    ap.add_argument("--busy-processes", type=int, default=2)
    ap.add_argument("--settle", type=float, default=12.0,
                    help="seconds between starting the busy processes and the first workload")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per workload run")
    ap.add_argument("--out", default=None, help="write the markdown table here")
    ap.add_argument("--note", default="", help="a line written under the heading")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker)), flush=True)
        return

    def log(msg):
        print(msg, flush=True)

    import torch

    import skset

    cmd = "python benchmarks/bench_threads.py " + " ".join(sys.argv[1:])
    lines = ["# skset's thread policy: default against one and two threads (issue 37)\n",
             f"Run {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on "
             f"{platform.machine()}, {len(os.sched_getaffinity(0))} usable cores, torch "
             f"{torch.__version__}, skset {skset.__version__}, Python {platform.python_version()}."
             "\n", f"Command: `OMP_WAIT_POLICY=PASSIVE nice -n 10 {cmd}`\n"]
    if args.note:
        lines.append(args.note + "\n")
    lines.append("Seconds: median over rounds; `default / best`: the default's time over the "
                 "faster of one and two threads. `results`: which settings gave bit-identical "
                 "results (digest of the output).\n")
    lines.append(f"Policy scope overhead per skset call: {scope_overhead()}.\n")
    conds = ["idle"] if args.idle_only else ["busy"] if args.busy_only else ["idle", "busy"]
    for c in conds:
        condition(c, args, lines, log)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
