"""skset.utils: streaming transforms over lazily loaded sets, thread limits."""

import tracemalloc

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info

from skset import NystromFeatures, OTKClassifier, OTKEmbedding
from skset._sets import check_sets
from skset.utils import iter_transform, limit_threads, set_worker_threads

D = 16


class LazySets:
    """Set ``i`` is read from a memory-mapped file on demand (like a dataset on disk)."""

    def __init__(self, path, offsets, d):
        self.data = np.memmap(path, dtype=np.float32, mode="r")
        self.offsets = offsets
        self.d = d

    def __len__(self):
        return len(self.offsets) - 1

    def __getitem__(self, i):
        if not 0 <= i < len(self):
            raise IndexError(i)
        a, b = self.offsets[i] * self.d, self.offsets[i + 1] * self.d
        return self.data[a:b].reshape(-1, self.d)


@pytest.fixture(scope="module")
def on_disk(tmp_path_factory):
    rng = np.random.default_rng(0)
    lengths = rng.integers(20, 100, 3000)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    path = tmp_path_factory.mktemp("sets") / "elements.f32"
    mm = np.memmap(path, dtype=np.float32, mode="w+", shape=(int(offsets[-1]) * D,))
    for start in range(0, len(lengths), 500):  # written in pieces, never all in memory
        stop = min(start + 500, len(lengths))
        n = int(offsets[stop] - offsets[start])
        mm[offsets[start] * D : offsets[stop] * D] = rng.normal(size=n * D).astype(np.float32)
    mm.flush()
    del mm
    return LazySets(path, offsets, D)


@pytest.fixture(scope="module")
def otk(on_disk):
    return OTKEmbedding(n_supports=4, random_state=0).fit([on_disk[i] for i in range(50)])


def test_check_sets_keeps_memmaps_as_views(on_disk):
    coll = check_sets(on_disk)  # an object with __len__/__getitem__, indexed lazily
    assert len(coll) == len(on_disk)
    assert all(np.shares_memory(s, on_disk.data) for s in coll.sets[:20])
    mm3 = np.memmap(on_disk.data.filename, dtype=np.float32, mode="r", shape=(100, 10, D))
    assert np.shares_memory(check_sets(mm3).sets[7], mm3)


def test_iter_transform_equals_transform(on_disk, otk):
    sub = [on_disk[i] for i in range(400)]
    full = otk.transform(sub)
    chunks = list(iter_transform(otk, sub, chunk_size=128))
    assert [c.shape[0] for c in chunks] == [128, 128, 128, 16]
    np.testing.assert_allclose(np.concatenate(chunks), full, rtol=1e-5, atol=1e-5)
    # a generator is read once, in order
    gen = (on_disk[i] for i in range(400))
    np.testing.assert_allclose(np.concatenate(list(iter_transform(otk, gen, chunk_size=100))),
                               full, rtol=1e-5, atol=1e-5)
    # a 3-D memmap is cut into 3-D views
    mm3 = np.memmap(on_disk.data.filename, dtype=np.float32, mode="r", shape=(100, 10, D))
    np.testing.assert_allclose(np.concatenate(list(iter_transform(otk, mm3, chunk_size=30))),
                               otk.transform(np.asarray(mm3)), rtol=1e-5, atol=1e-5)


def test_iter_transform_other_methods_and_forms(on_disk):
    X = [on_disk[i] for i in range(60)]
    y = np.arange(60) % 3
    clf = OTKClassifier(n_components=4, n_supports=2, max_iter=1, random_state=0).fit(X, y)
    proba = np.concatenate(list(iter_transform(clf, iter(X), chunk_size=25,
                                               method="predict_proba")))
    np.testing.assert_allclose(proba, clf.predict_proba(X), rtol=1e-5, atol=1e-6)
    nf = NystromFeatures(n_components=5, random_state=0).fit(X)
    per_set = [f for chunk in iter_transform(nf, X, chunk_size=7) for f in chunk]
    assert [f.shape for f in per_set] == [(x.shape[0], 5) for x in X]
    with pytest.raises(ValueError, match="chunk_size"):
        next(iter_transform(nf, X, chunk_size=0))
    with pytest.raises(ValueError, match="method"):
        next(iter_transform(nf, X, method="fit"))
    with pytest.raises(TypeError, match="predict"):
        next(iter_transform(nf, X, method="predict"))
    with pytest.raises(TypeError, match="iterable"):
        next(iter_transform(nf, 3))


def test_transform_of_a_generator_points_to_iter_transform(otk, on_disk):
    with pytest.raises(TypeError, match="iter_transform"):
        otk.transform(on_disk[i] for i in range(3))


def test_streaming_memory_is_bounded(on_disk, otk):
    """Peak numpy memory of a streaming pass over 3,000 memory-mapped sets stays a small fraction
    of the 11 MB of data (tracemalloc sees numpy's buffers, the memmap pages are not counted)."""
    n_bytes = on_disk.data.nbytes
    tracemalloc.start()
    try:
        total = 0.0
        n = 0
        for chunk in iter_transform(otk, on_disk, chunk_size=100):
            total += float(chunk.sum())
            n += chunk.shape[0]
        _, peak_stream = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        materialised = [np.array(on_disk[i]) for i in range(len(on_disk))]
        otk.transform(materialised)
        _, peak_full = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print(f"streaming peak {peak_stream / 1e6:.2f} MB, full {peak_full / 1e6:.2f} MB, "
          f"data {n_bytes / 1e6:.2f} MB")
    assert n == len(on_disk) and np.isfinite(total)
    assert peak_stream < 0.15 * n_bytes, (peak_stream, n_bytes)
    assert peak_stream < 0.25 * peak_full, (peak_stream, peak_full)


def _blas_threads():
    return [p["num_threads"] for p in threadpool_info()]


def test_limit_threads_sets_and_restores():
    before_torch = torch.get_num_threads()
    before_pools = _blas_threads()
    with limit_threads(1) as n:
        assert n == 1
        assert torch.get_num_threads() == 1
        assert all(t == 1 for t in _blas_threads())
        np.linalg.svd(np.random.default_rng(0).normal(size=(50, 50)))  # still works
    assert torch.get_num_threads() == before_torch
    assert _blas_threads() == before_pools
    with pytest.raises(RuntimeError), limit_threads(1):
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before_torch
    with pytest.raises(ValueError, match="n_threads"):
        with limit_threads(0):
            pass


def test_set_worker_threads():
    before = torch.get_num_threads()
    try:
        assert set_worker_threads(1) == 1
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=before)


def test_iter_transform_reads_a_series_by_position_and_tensors_of_any_float():
    # a pandas Series of sets (check_sets reads it by position): chunks by position too (they
    # were taken by label: another order, or a KeyError); bfloat16 tensors read as float32
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(3, 7)), 2)) for _ in range(6)]
    est = NystromFeatures(n_components=4, random_state=0).fit(X)
    for index in (list(range(5, -1, -1)), list("abcdef")):
        series = pd.Series(np.empty(len(X), dtype=object), index=index)
        for i, x in enumerate(X):
            series.iloc[i] = x
        got = [z for chunk in iter_transform(est, series, chunk_size=4) for z in chunk]
        # each set's element features, to rounding (chunks of another shape can take another
        # matrix-product kernel, as on a GPU); a set read by label would differ at every value
        for g, want in zip(got, est.transform(X), strict=True):
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-7)
    half = [torch.as_tensor(x).to(torch.bfloat16) for x in X]
    sets = check_sets(half).sets
    assert sets[0].dtype == np.float32
    np.testing.assert_array_equal(sets[0], half[0].float().numpy())
    assert check_sets(torch.stack([h[:3] for h in half])).sets[1].dtype == np.float32


def test_iter_transform_checks_its_arguments_at_the_call(otk):
    """Not at the first chunk: ``iter_transform`` returns a generator, it is not one."""
    with pytest.raises(ValueError, match="method must be one of"):
        iter_transform(otk, [], method="fit")
    with pytest.raises(ValueError, match="chunk_size"):
        iter_transform(otk, [], chunk_size=-3)
