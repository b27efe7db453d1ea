"""The level + shape coding of k-mers in torch (``skset.nn.kmer_level_shape``, what the supervised
OTK models and the set networks' exported front run on every batch): forward and backward of 64
sets of 991 10-mers of 4 features, median of 25 calls. ``ROOT`` is the checkout to import (run it
from two checkouts in turn to compare them side by side).

    OMP_NUM_THREADS=2 python benchmarks/bench_kmer_coding.py ROOT
"""

import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else ".")

import torch  # noqa: E402

from skset.nn.nystrom import kmer_level_shape  # noqa: E402

torch.manual_seed(0)
x = torch.randn(64, 991, 10 * 4, requires_grad=True)
times = []
for _ in range(25):
    t = time.perf_counter()
    kmer_level_shape(x, 10).sum().backward()
    times.append(time.perf_counter() - t)
print(f"{sys.argv[1] if len(sys.argv) > 1 else '.'}: median {sorted(times)[12] * 1e3:.2f} ms "
      "forward + backward")
