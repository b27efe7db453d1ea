"""The cost of ``ABCKernel``'s ``"knn"`` input prior against the kernel's own forward pass: 32
instances of 100 elements of 2 and 64 features, medians of 21 calls, two threads.

    PYTHONPATH=. python benchmarks/bench_abc_prior_time.py

Run from two checkouts to compare the prior's computation. Results: ``results/abc.md``,
"Instances of a few elements".
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import statistics  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

from skset.nn.abc import ABCKernel  # noqa: E402


def median_time(f, repeat: int = 21) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    torch.set_num_threads(2)
    for d in (2, 64):
        x = torch.randn(32, 100, d)
        mask = torch.ones(32, 100, dtype=torch.bool)
        prior = ABCKernel(d, dim=64, n_heads=4, input_similarity="knn")
        plain = ABCKernel(d, dim=64, n_heads=4)
        with torch.no_grad():
            t_prior = median_time(lambda p=prior, x=x, m=mask: p.input_prior(x, m))
            t_forward = median_time(lambda k=plain, x=x, m=mask: k(x, m))
        print(f"d={d}: kNN prior {t_prior * 1e3:.2f} ms, the kernel's forward "
              f"{t_forward * 1e3:.2f} ms (32 instances of 100)")


if __name__ == "__main__":
    main()
