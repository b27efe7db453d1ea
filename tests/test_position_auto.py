"""``OTKEmbedding(position_sigma="auto")``: whether positions are read, chosen from the labels.

Positions are taken when where an event sits in a sequence carries the class (the same events,
early against late), not when the sets are bags of i.i.d. elements or when the same sequences
are shuffled; a fit that keeps no positions is exactly the ``position_sigma=None`` fit; the
choice holds in transform, the layer, pickling, ``partial_fit``, searches and clones."""

import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV

import skset
from skset import OTKEmbedding
from skset._sets import pack
from skset.embedding._position_choice import POSITION_CANDIDATE


def _when_task(n=80, length=30, seed=0):
    """Two classes of sequences of 2-D elements with the same content, a burst of 6 elements
    near ``(0.9, 0.9)`` among noise, early (class 0) or late (class 1) in the sequence: as bags the
    classes have one distribution; the burst's place tells them apart."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    X = []
    for c in y:
        x = rng.normal(size=(length, 2))
        start = int(rng.integers(0, 6)) + (length - 12 if c else 0)
        x[start:start + 6] = 3.0 + 0.3 * rng.normal(size=(6, 2))
        X.append(0.3 * x)  # of the scale of a Nystrom map's features
    return X, y


def _bag_task(n=60, seed=0):
    """Bags of i.i.d. elements whose class moves their mean: order carries nothing."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    X = [0.3 * rng.normal(loc=0.8 * c, size=(int(rng.integers(20, 40)), 3)) for c in y]
    return X, y


def _accuracy(sigma, X, y, Xt, yt):
    otk = OTKEmbedding(n_supports=6, position_sigma=sigma, random_state=0).fit(X, y)
    clf = LogisticRegression(max_iter=1000).fit(otk.transform(X), y)
    return clf.score(otk.transform(Xt), yt)


def test_place_of_an_event_takes_positions_and_they_help():
    X, y = _when_task()
    Xt, yt = _when_task(seed=1)
    otk = OTKEmbedding(n_supports=6, random_state=0).fit(X, y)
    assert otk.position_sigma == "auto" and otk.position_sigma_ == POSITION_CANDIDATE
    scores = otk.position_scores_
    assert set(scores) == {"none", "positions", "shuffled"}
    assert scores["positions"] > max(scores["none"], scores["shuffled"])
    assert _accuracy("auto", X, y, Xt, yt) >= 0.9 > _accuracy(None, X, y, Xt, yt) + 0.2


def test_shuffled_sequences_keep_no_positions():
    """The same sets with the elements of each shuffled: the order no longer carries the class,
    and the rule no longer reads it (the test that fails if the rule looked at anything but the
    order)."""
    X, y = _when_task()
    rng = np.random.default_rng(3)
    shuffled = [x[rng.permutation(len(x))] for x in X]
    otk = OTKEmbedding(n_supports=6, random_state=0).fit(shuffled, y)
    assert otk.position_sigma_ is None
    assert "shuffled" not in otk.position_scores_


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bags_keep_no_positions_and_fit_as_none(seed):
    X, y = _bag_task(seed=seed)
    auto = OTKEmbedding(n_supports=4, random_state=0).fit(X, y)
    assert auto.position_sigma_ is None and auto.position_scores_ is not None
    none = OTKEmbedding(n_supports=4, position_sigma=None, random_state=0).fit(X, y)
    assert none.position_sigma_ is None and none.position_scores_ is None
    np.testing.assert_array_equal(auto.mean_, none.mean_)
    np.testing.assert_array_equal(auto.transform(X), none.transform(X))


@pytest.mark.parametrize("case", ["no labels", "per-element labels", "multi-output",
                                  "one element per set", "one class"])
def test_nothing_to_choose_from_gives_none(case):
    X, y = _when_task(n=40)
    if case == "no labels":
        y = None
    elif case == "per-element labels":
        y = [np.arange(len(x)) % 3 for x in X]
    elif case == "multi-output":
        y = np.c_[y, 1 - y]
    elif case == "one element per set":
        X = [x[:1] for x in X]
    else:
        y = np.zeros(len(X), dtype=int)
    otk = OTKEmbedding(n_supports=4, random_state=0).fit(X, y)
    assert otk.position_sigma_ is None and otk.position_scores_ is None
    ref = OTKEmbedding(n_supports=4, position_sigma=None, random_state=0).fit(X)
    np.testing.assert_array_equal(otk.transform(X), ref.transform(X))


def test_explicit_width_is_kept_and_reported():
    X, y = _when_task(n=40)
    otk = OTKEmbedding(n_supports=4, position_sigma=0.1, random_state=0).fit(X, y)
    assert otk.position_sigma_ == 0.1 and otk.position_scores_ is None


def test_bad_labels_are_named():
    X, y = _when_task(n=40)
    with pytest.raises(ValueError, match="y has 39 entries"):
        OTKEmbedding(n_supports=4).fit(X, y[:-1])
    with pytest.raises(ValueError, match="NaN"):
        OTKEmbedding(n_supports=4).fit(X, np.where(y == 1, np.nan, 0.0))


def test_zero_weight_sets_leave_their_labels_out():
    """Sets of weight 0 are left out of the fit, their labels with them: the choice equals the
    one made without those sets."""
    X, y = _when_task()
    sw = np.ones(len(X))
    sw[::5] = 0
    keep = sw > 0
    a = OTKEmbedding(n_supports=6, random_state=0).fit(X, y, sample_weight=sw)
    b = OTKEmbedding(n_supports=6, random_state=0).fit([x for x, k in zip(X, keep) if k],
                                                        y[keep])
    assert a.position_sigma_ == b.position_sigma_ == POSITION_CANDIDATE
    assert a.position_scores_ == pytest.approx(b.position_scores_)


def test_the_choice_holds_in_layer_pickle_clone_and_partial_fit(tmp_path):
    X, y = _when_task()
    otk = OTKEmbedding(n_supports=6, random_state=0).fit(X, y)
    assert otk.position_sigma_ == POSITION_CANDIDATE
    layer = otk.to_module()
    assert layer.position_sigma == POSITION_CANDIDATE
    Xp, M = pack(X[:5], dtype=torch.float32)
    with torch.no_grad():
        raw = layer(Xp, M).reshape(5, -1).numpy()
    ref = otk._raw_embed(X[:5], torch.as_tensor(otk.references_))
    np.testing.assert_allclose(raw, ref, rtol=1e-4, atol=1e-5)
    again = pickle.loads(pickle.dumps(otk))
    np.testing.assert_array_equal(again.transform(X), otk.transform(X))
    path = tmp_path / "otk.skset"
    skset.save(otk, path)
    loaded = skset.load(path)
    assert loaded.position_sigma_ == POSITION_CANDIDATE
    assert loaded.position_scores_ == otk.position_scores_
    np.testing.assert_array_equal(loaded.transform(X), otk.transform(X))
    assert clone(otk).position_sigma == "auto" and not hasattr(clone(otk), "position_sigma_")
    # a later partial_fit continues with the first chunk's choice
    streamed = OTKEmbedding(n_supports=6, random_state=0).partial_fit(X[:60], y[:60])
    chosen = streamed.position_sigma_
    streamed.partial_fit(X[60:])
    assert streamed.position_sigma_ == chosen
    # a model saved before position_sigma_ existed transforms with its explicit value
    legacy = OTKEmbedding(n_supports=6, position_sigma=None, random_state=0).fit(X)
    del legacy.position_sigma_
    np.testing.assert_array_equal(legacy.transform(X), OTKEmbedding(
        n_supports=6, position_sigma=None, random_state=0).fit(X).transform(X))


def test_grid_search_over_position_sigma():
    X, y = _when_task(n=60)
    from sklearn.pipeline import make_pipeline
    pipe = make_pipeline(OTKEmbedding(n_supports=6, random_state=0),
                         LogisticRegression(max_iter=1000))
    grid = GridSearchCV(pipe, {"otkembedding__position_sigma": [None, 0.3, "auto"]}, cv=3)
    grid.fit(X, y)
    assert set(grid.cv_results_["param_otkembedding__position_sigma"]) == {None, 0.3, "auto"}
    assert grid.best_params_["otkembedding__position_sigma"] in (0.3, "auto")


def test_supervised_otk_chooses_positions_on_its_initial_embedding():
    """``OTKClassifier(position_sigma="auto")``: the choice is made on the initial embedding
    and the trained network keeps it (the classifier's default; the regressor's is ``None``);
    ``position_sigma=None`` reads no positions."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from skset import OTKClassifier, OTKRegressor

    X, y = _when_task()
    Xt, yt = _when_task(seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        # single elements: k-mers would read the order too (OTKClassifier's default window)
        auto = OTKClassifier(n_components=16, window=1, n_supports=6, max_iter=5,
                             random_state=0).fit(X, y)
        none = OTKClassifier(n_components=16, window=1, n_supports=6, position_sigma=None,
                             max_iter=5, random_state=0).fit(X, y)
    assert auto.position_sigma_ == auto.embedding_.position_sigma_ == POSITION_CANDIDATE
    assert auto.module_.otk.position_sigma == POSITION_CANDIDATE
    assert none.position_sigma_ is None
    assert auto.score(Xt, yt) >= 0.9 > none.score(Xt, yt) + 0.2
    assert auto.position_sigma == "auto" and OTKRegressor().position_sigma is None


def test_labels_of_numbers_in_an_object_column_choose_as_ints():
    """Numbers held in an object array (a pandas column of dtype object) are labels to the
    "auto" rules as ints are (scikit-learn's type_of_target calls them 'unknown': the rules
    took them for no labels and kept the fixed choice, silently)."""
    import pandas as pd

    from skset import OTKEmbedding

    rng = np.random.default_rng(3)
    y = np.arange(80) % 2
    sets = []
    for label in y:  # the class is where a spike sits: positions help
        s = rng.normal(size=(30, 2)) * 0.3
        s[rng.integers(0, 10) if label == 0 else rng.integers(20, 30)] += [3, 0]
        sets.append(s)
    ref = OTKEmbedding(n_supports=5, random_state=0).fit(sets, y)
    assert ref.position_sigma_ is not None
    for labels in (y.astype(object), pd.Series(y, dtype=object)):
        est = OTKEmbedding(n_supports=5, random_state=0).fit(sets, labels)
        assert est.position_sigma_ == ref.position_sigma_
        assert est.position_scores_ == ref.position_scores_
