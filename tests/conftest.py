import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def make_sets(rng, n_sets=12, d=4, low=3, high=15, dtype=np.float64):
    return [rng.normal(size=(int(n), d)).astype(dtype) for n in rng.integers(low, high, n_sets)]


@pytest.fixture
def sets(rng):
    return make_sets(rng)
