"""The cost of ``ABCKernel``'s ``"knn"`` input prior against the kernel's own forward pass: 32
instances of 100 elements of 2 and 64 features, medians of 21 calls, two threads.

    PYTHONPATH=. python benchmarks/bench_abc_prior_time.py

Run from two checkouts to compare the prior's computation. Results: ``results/abc.md``,
"Instances of a few elements".
"""
import os; os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import statistics
import time

import torch

from skset.nn.abc import ABCKernel

torch.set_num_threads(2)
for d in (2, 64):
    x = torch.randn(32, 100, d); mask = torch.ones(32, 100, dtype=torch.bool)
    prior = ABCKernel(d, dim=64, n_heads=4, input_similarity="knn")
    plain = ABCKernel(d, dim=64, n_heads=4)
    def t(f):
        ts = []
        for _ in range(21):
            a = time.perf_counter(); f(); ts.append(time.perf_counter() - a)
        return statistics.median(ts)
    with torch.no_grad():
        tp = t(lambda: prior.input_prior(x, mask)); tf = t(lambda: plain(x, mask))
    print(f"d={d}: kNN prior {tp*1e3:.2f} ms, the kernel's forward {tf*1e3:.2f} ms (32 instances of 100)")
