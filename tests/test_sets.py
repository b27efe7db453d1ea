import numpy as np
import pytest
import torch

from skset._sets import (
    check_set_labels,
    check_sets,
    iter_packed,
    kmer_windows,
    length_batches,
    pack,
    unpack,
)


def test_forms_are_detected_by_structure(rng):
    lst = [rng.normal(size=(n, 3)) for n in (2, 5, 4)]
    assert check_sets(lst).form == "list"
    obj = np.empty(3, dtype=object)
    obj[:] = lst
    c = check_sets(obj)
    assert c.form == "object" and [s.shape for s in c.sets] == [(2, 3), (5, 3), (4, 3)]
    arr = rng.normal(size=(4, 6, 3))
    c = check_sets(arr)
    assert c.form == "3d" and len(c) == 4 and c.sets[0].shape == (6, 3)
    # an equal-size list stays a list of sets (no silent 3-D conversion)
    eq = [rng.normal(size=(5, 3)) for _ in range(3)]
    assert check_sets(eq).form == "list"
    out = check_sets(obj).wrap([s * 2 for s in c.sets[:3]])
    assert out.dtype == object and out.shape == (3,)


@pytest.mark.parametrize(
    "X, match",
    [
        ([np.zeros((3, 2)), np.zeros((0, 2))], "set 1 is empty"),
        ([np.zeros((3, 2)), np.array([[np.nan, 1.0]])], "set 1 contains NaN"),
        ([np.zeros((3, 2)), np.array([[np.inf, 1.0]])], "set 1 contains infinity"),
        ([np.zeros((3, 2)), np.zeros((3, 4))], "set 1 has 4 features but set 0 has 2"),
        ([np.zeros((3, 2)), np.zeros(3)], "set 1 is 1-D"),
        ([1.0, 2.0, 3.0], "set 0 is a scalar"),
        (np.zeros(5), "1-D array"),
        (np.zeros((2, 3, 4, 5)), "4 dimensions"),
        (np.zeros((4, 3)), "2-D array of shape"),
        ([], "0 set"),
    ],
)
def test_bad_inputs_name_the_set(X, match):
    with pytest.raises(ValueError, match=match):
        check_sets(X)


def test_type_errors():
    with pytest.raises(TypeError):
        check_sets("abc")
    with pytest.raises(TypeError, match="strings"):
        check_sets([np.array([["a", "b"]])])
    with pytest.raises(TypeError):
        check_sets(None)


def test_n_features_mismatch_with_fit():
    with pytest.raises(ValueError, match="fitted on 3 features"):
        check_sets([np.zeros((2, 4))], n_features=3)


def test_labels():
    assert check_set_labels([1, 2, 3], 3).shape == (3,)
    with pytest.raises(ValueError, match="2 entries but X holds 3 sets"):
        check_set_labels([1, 2], 3)
    with pytest.raises(ValueError, match="shape"):
        check_set_labels(np.zeros((3, 2)), 3)
    assert check_set_labels(np.zeros((3, 2)), 3, multi_output=True).shape == (3, 2)
    with pytest.raises(ValueError, match="NaN"):
        check_set_labels([1.0, np.nan, 2.0], 3)


def test_pack_unpack_roundtrip(rng):
    sets = [rng.normal(size=(n, 3)) for n in (4, 1, 7)]
    X, M = pack(sets, dtype=torch.float64)
    assert X.shape == (3, 7, 3) and M.sum(1).tolist() == [4, 1, 7]
    assert torch.all(X[~M] == 0)
    for a, b in zip(unpack(X, M), sets):
        np.testing.assert_array_equal(a, b)


def test_length_batches_budget_and_cover(rng):
    lengths = rng.integers(1, 300, 500)
    batches = length_batches(lengths, max_elements=2000)
    allidx = np.sort(np.concatenate(batches))
    np.testing.assert_array_equal(allidx, np.arange(500))
    for b in batches:
        assert len(b) * lengths[b].max() <= 2000 or len(b) == 1
    # a set longer than the budget gets its own batch
    b = length_batches(np.array([5, 5000, 3]), max_elements=100)
    assert any(len(x) == 1 and x[0] == 1 for x in b)
    # sorting keeps padding waste low compared with input order
    def waste(bs):
        return sum(len(x) * lengths[x].max() - lengths[x].sum() for x in bs)
    assert waste(batches) < 0.2 * waste(length_batches(lengths, max_elements=2000, sort=False))


def test_iter_packed_covers_all(rng):
    sets = [rng.normal(size=(n, 2)) for n in rng.integers(1, 40, 50)]
    seen = []
    for idx, X, _ in iter_packed(sets, max_elements=100):
        assert X.shape[0] * X.shape[1] <= max(100, X.shape[1])
        for b, i in enumerate(idx):
            np.testing.assert_allclose(X[b, : len(sets[i])].numpy(), sets[i], rtol=1e-6)
        seen.extend(idx)
    assert sorted(seen) == list(range(50))


def test_kmer_windows_matches_naive_loop(rng):
    sets = [rng.normal(size=(n, 2)) for n in (3, 6, 4)]
    out = kmer_windows(sets, 3)
    for s, o in zip(sets, out):
        naive = np.stack([s[i : i + 3].reshape(-1) for i in range(len(s) - 2)])
        np.testing.assert_array_equal(o, naive)
    # a set shorter than the window: one k-mer, its last element repeated
    np.testing.assert_array_equal(kmer_windows(sets, 4)[0], sets[0][[0, 1, 2, 2]].reshape(1, -1))


def test_kmer_windows_and_kmer_unfold_agree(rng):
    """The numpy k-mers of the estimators and the tensor k-mers of the modules are the same rows."""
    from skset.nn import kmer_unfold

    sets = [rng.normal(size=(n, 2)) for n in (3, 7, 5)]
    X, M = pack(sets, dtype=torch.float64)
    U, UM = kmer_unfold(X, M, 3)
    for b, k in enumerate(kmer_windows(sets, 3)):
        assert int(UM[b].sum()) == len(k)
        np.testing.assert_array_equal(U[b, UM[b]].numpy(), k)


def test_inputs_not_modified(rng):
    sets = [rng.normal(size=(n, 3)) for n in (4, 5)]
    before = [s.copy() for s in sets]
    coll = check_sets(sets, dtype=np.float32)
    pack(coll.sets)
    kmer_windows(coll.sets, 2)
    for a, b in zip(sets, before):
        np.testing.assert_array_equal(a, b)


def test_padding_tolerance_bounds_waste(rng):
    lengths = rng.integers(50, 1001, 1000)
    plain = length_batches(lengths, max_elements=131072)
    tight = length_batches(lengths, max_elements=131072, padding_tolerance=0.25)
    np.testing.assert_array_equal(np.sort(np.concatenate(tight)), np.arange(1000))

    def ratio(bs):
        return sum(len(b) * lengths[b].max() for b in bs) / lengths.sum()

    assert ratio(tight) < 1.25 < ratio(plain) or ratio(tight) < ratio(plain)
    for b in tight:
        padded = len(b) * lengths[b].max()
        assert padded <= 131072 and (padded <= 1.25 * lengths[b].sum() or padded <= 131072 // 16
                                     or len(b) == 1)


def _outcome(fn):
    try:
        out = fn()
    except (ValueError, TypeError) as exc:
        return type(exc), str(exc)
    return [(a.dtype, a.shape, a.tobytes()) for a in out.sets], out.form


@pytest.mark.parametrize("case", range(9))
def test_check_sets_fast_path_decides_as_the_elementwise_checks(monkeypatch, rng, case):
    """The one-dot fast path of ``check_sets`` accepts, converts and rejects exactly as the
    element-wise checks it skips (forced here by disabling it)."""
    import skset._sets as sets_mod

    big64 = np.full((4, 2), 0.9e150)  # sum of squares > limit^2, every value within it: accepted
    cases = [
        [rng.normal(size=(n, 3)).astype(np.float32) for n in (5, 1, 8)],
        [rng.normal(size=(3, 2)), rng.normal(size=(2, 2)).astype(np.float32)],  # widened
        [np.asfortranarray(rng.normal(size=(6, 3))), rng.normal(size=(2, 3))],
        [rng.normal(size=(3, 2)), np.array([[1.0, np.nan]])],
        [rng.normal(size=(3, 2)), np.array([[1.0, -np.inf]])],
        [rng.normal(size=(3, 2)).astype(np.float32), np.array([[2e15, 0.0]], np.float32)],
        [rng.normal(size=(3, 2)), rng.normal(size=(3, 4))],  # mixed dimensions
        [big64, np.array([[2e150, 0.0]])],
        [rng.integers(0, 5, size=(3, 2)), rng.normal(size=(2, 2)).astype(np.float16)],
    ]
    X = cases[case]
    for kw in ({}, {"compute_dtype": "float32"}, {"compute_dtype": "float64"},
               {"dtype": np.float32}, {"n_features": 3}, {"min_elements": 2}):
        fast = _outcome(lambda kw=kw: check_sets(X, **kw))
        with monkeypatch.context() as m:
            m.setattr(sets_mod, "plainly_finite_sets",
                      lambda sets, limit, dtypes: np.zeros(len(sets), dtype=bool))
            slow = _outcome(lambda kw=kw: check_sets(X, **kw))
        assert fast == slow, (case, kw)
    assert _outcome(lambda: check_sets([big64], compute_dtype="float64"))[1] == "list"


def test_finiteness_in_runs_of_small_sets_is_the_test_of_each_set(rng):
    """``plainly_finite_sets`` (one sum of squares per run of small sets) flags each set as
    ``plainly_finite`` alone does: a NaN, an infinity or a value over the limit in one small set
    of a run, large sets, mixed dtypes, Fortran-ordered and non-array sets."""
    from skset._finite import plainly_finite, plainly_finite_sets

    sets = [rng.normal(size=(int(rng.integers(1, 5)), 3)) for _ in range(3000)]
    sets[17] = sets[17].copy()
    sets[17][0, 1] = np.nan
    sets[1500] = np.full((2, 3), np.inf)
    sets[2100] = np.array([[2e15, 0.0, 0.0]])
    sets[40] = sets[40].astype(np.float32)
    sets[41] = np.asfortranarray(rng.normal(size=(3, 2)))[:, :1]
    sets[42] = [[1.0, 2.0, 3.0]]
    sets[43] = rng.normal(size=(30000, 3))
    sets[44] = np.zeros((0, 3))
    dtypes = (np.dtype(np.float32), np.dtype(np.float64))
    for limit in (None, 1e15):
        got = plainly_finite_sets(sets, limit, dtypes, chunk=500)
        want = [type(s) is np.ndarray and s.ndim == 2 and plainly_finite(s, limit) for s in sets]
        np.testing.assert_array_equal(got, want)
        assert not got[17] and not got[1500] and got[2100] == (limit is None) and got[43]


def test_pack_zeroes_only_the_padding_and_keeps_values(rng):
    sets = [rng.normal(size=(n, 3)).astype(np.float32) for n in (4, 7, 1, 7)]
    X, M = pack(sets, n_max=9)
    assert X.shape == (4, 9, 3) and torch.all(X[~M] == 0)
    for i, s in enumerate(sets):
        np.testing.assert_array_equal(X[i, : len(s)].numpy(), s)


def test_sparse_labels_read_as_their_dense_rows():
    # a scipy.sparse y (which scikit-learn's final steps take) was read as "a scalar": a
    # pipeline NystromFeatures -> OTKEmbedding -> OneVsRestClassifier failed at its first step
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.pipeline import make_pipeline

    from skset import NystromFeatures, OTKEmbedding
    from skset._sets import check_set_labels

    y = np.array([0, 1, 1, 0, 1, 0])
    np.testing.assert_array_equal(check_set_labels(sp.csr_matrix(y[:, None]), 6), y)
    Y = np.c_[y, 1 - y, y]
    np.testing.assert_array_equal(check_set_labels(sp.csr_matrix(Y), 6, multi_output=True), Y)
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(n), 2)) for n in rng.integers(4, 9, 6)]
    pipe = make_pipeline(NystromFeatures(n_components=4, random_state=0),
                         OTKEmbedding(n_supports=2, random_state=0),
                         OneVsRestClassifier(LogisticRegression()))
    assert pipe.fit(X, sp.csr_matrix(Y)).predict(X).shape == (6, 3)


def test_standardized_sets_in_one_pass_are_those_set_by_set(rng):
    from skset._weighting import standardized_sets

    mean, scale = rng.normal(size=3), rng.uniform(0.5, 2.0, size=3)
    for sizes, dtype in (((1, 4, 2, 3) * 50, np.float32), ((300, 200), np.float64), ((5,), np.float32)):
        sets = [rng.normal(size=(n, 3)).astype(dtype) for n in sizes]
        before = [s.copy() for s in sets]
        got = standardized_sets(sets, mean, scale)
        for g, s, b in zip(got, sets, before):
            assert g.dtype == dtype and g.shape == s.shape
            np.testing.assert_array_equal(g, ((b - mean) / scale).astype(dtype))
            np.testing.assert_array_equal(s, b)  # the sets are not written


def test_element_weights_normalised_in_one_pass_name_the_first_faulty_set():
    """The masses of 2,000 sets normalised at once equal each set's own normalisation (to a few
    roundings of its sum), sets of masses near float64's largest included; each fault names its
    first set."""
    from skset._weighting import check_element_weights

    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 9, 2000)
    W = [rng.random(n) * 10.0 ** rng.integers(-300, 300) for n in lengths]
    W[5] = np.full(lengths[5], 1e308)
    before = [w.copy() for w in W]
    out = check_element_weights(W, lengths)
    for w, o, b in zip(W, out, before):
        np.testing.assert_array_equal(w, b)  # the input is not written
        ref = w / w.max() if not np.isfinite(w.sum()) else w
        np.testing.assert_allclose(o, ref / ref.sum(), rtol=1e-15, atol=0)
    for i, fault, msg in ((7, "nan", "NaN or infinity"), (9, "negative", "negative"),
                          (3, "zero", "all zero")):
        bad = [w.copy() for w in W]
        for j in (i, i + 100):  # the first one is named
            if fault == "zero":
                bad[j][:] = 0.0
            else:
                bad[j][0] = np.nan if fault == "nan" else -1.0
        with pytest.raises(ValueError, match=f"set {i} (contains|is) .*{msg}"):
            check_element_weights(bad, lengths)


def test_element_weight_errors_name_the_first_faulty_set_whatever_the_fault():
    """Faults of different kinds in two sets: the first set is named (the one-pass check had
    named each kind's first set in turn, and a set that cannot be read before an earlier set's
    faulty values)."""
    from skset._weighting import check_element_weights

    ok = np.ones(3)
    cases = (([-ok, ok * np.nan], "set 0 contains negative"),
             ([ok * 0, -ok], "set 0 is all zero"),
             ([ok * np.nan, np.ones(4)], "set 0 contains NaN"))
    for weights, msg in cases:
        with pytest.raises(ValueError, match=msg):
            check_element_weights(weights, [3, 3])
