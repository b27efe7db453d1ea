"""The ceiling of the OTK transform's share of the matmul rate on S1 (issue 26): the two GEMMs of
the S1 transform (512 sets x 100 elements x 128 features, 64 supports) timed alone, as the
transform runs them (the similarity as one (51200 x 128) @ (128 x 64) product, the pooling as a
batched (64 x 100) @ (100 x 128) product), beside the 2048^2 float32 matmul, in one process.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_otk_gemm_ceiling.py
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import statistics  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402


def best_and_median(f, n=15):
    f()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return min(ts), statistics.median(ts)


def main():
    torch.manual_seed(0)
    x, z, plans = torch.randn(512, 100, 128), torch.randn(64, 128), torch.rand(512, 100, 64)
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    cases = {"mm": lambda: a @ b, "sim": lambda: x.reshape(-1, 128) @ z.T,
             "pool": lambda: torch.bmm(plans.transpose(1, 2), x)}
    best = {k: min(best_and_median(f)[0] for _ in range(3)) for k, f in cases.items()}
    rate = 2 * 2048 ** 3 / best["mm"] / 1e9
    flops = 2 * 512 * 100 * 64 * 128
    for k in ("sim", "pool"):
        r = flops / best[k] / 1e9
        print(f"{k}: {best[k] * 1e3:.2f} ms, {r:.0f} GFLOP/s, share {r / rate:.2f}")
    gemms = best["sim"] + best["pool"]
    total = 2 * flops + 10 * 2 * 2 * 512 * 100 * 64  # the bench's FLOP count (10 iterations)
    print(f"matmul rate {rate:.0f} GFLOP/s ({torch.get_num_threads()} threads); the two GEMMs "
          f"{gemms * 1e3:.2f} ms; S1's {total / 1e9:.2f} GFLOP in the GEMMs' time alone: share "
          f"{total / gemms / 1e9 / rate:.2f} (the ceiling if nothing else took time)")


if __name__ == "__main__":
    main()
