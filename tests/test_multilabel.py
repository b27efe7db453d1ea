"""Multi-label targets (an indicator matrix y) for the three set classifiers: what scikit-learn's
multilabel estimator checks ask (output formats, invariance to the representation of y), redone on
sets, and the parts of skset around them: the loss and its class weights against a naive loop,
the validation score against scikit-learn's average precision, OTK's closed-form head against
scikit-learn's LogisticRegression, the validation split, partial_fit, save / load and export."""

import io

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score, log_loss, roc_auc_score

import skset
import skset.utils
from skset.neural_network._heads import fit_multilabel_logistic_head
from skset.neural_network._multilabel import mean_average_precision
from skset.neural_network._training import split_validation

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

N_LABELS = 3


def _task(n_sets=90, seed=0):
    """Sets of 2-D points: background points around 0, and for each label a set carries, two
    points near that label's centre. Label l is learnable from the elements alone."""
    rng = np.random.default_rng(seed)
    centres = np.array([[4.0, 0.0], [0.0, 4.0], [-4.0, -4.0]])
    Y = (rng.random((n_sets, N_LABELS)) < 0.4).astype(np.int64)
    X = []
    for i in range(n_sets):
        parts = [rng.normal(scale=0.7, size=(int(rng.integers(2, 6)), 2))]
        parts += [centres[l] + 0.4 * rng.normal(size=(2, 2)) for l in np.flatnonzero(Y[i])]
        X.append(rng.permutation(np.concatenate(parts)))
    return X, Y


def _factory(cls, **defaults):
    return lambda **kw: cls(**{"random_state": 0, "device": "cpu", **defaults, **kw})


FACTORIES = {
    "ds": _factory(skset.DeepSetsClassifier, hidden_size=16, max_iter=150),
    "st": _factory(skset.SetTransformerClassifier, hidden_size=16, n_layers=1, n_heads=2,
                   n_inducing=4, max_iter=120),
    "otk": _factory(skset.OTKClassifier, n_components=8, n_supports=4, max_iter=3),
}
KINDS = list(FACTORIES)


@pytest.fixture(scope="module")
def fitted():
    X, Y = _task()
    return {k: f().fit(X[:60], Y[:60]) for k, f in FACTORIES.items()}, X, Y


# -- output formats (check_classifiers_multilabel_output_format_*) --------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_output_formats(fitted, kind):
    ests, X, Y = fitted
    est, X_te = ests[kind], X[60:]
    assert est.classes_.tolist() == list(range(N_LABELS))
    assert est.__sklearn_tags__().classifier_tags.multi_label
    pred, proba, dec = est.predict(X_te), est.predict_proba(X_te), est.decision_function(X_te)
    assert isinstance(pred, np.ndarray) and pred.shape == (30, N_LABELS)
    assert pred.dtype == Y.dtype and set(np.unique(pred)) <= {0, 1}
    assert isinstance(proba, np.ndarray) and proba.shape == (30, N_LABELS)
    assert proba.dtype.kind == "f" and np.all((proba > 0) & (proba < 1))
    assert dec.shape == (30, N_LABELS) and dec.dtype.kind == "f"
    np.testing.assert_allclose(proba, 1 / (1 + np.exp(-dec.astype(np.float64))), rtol=1e-12)
    np.testing.assert_array_equal(pred, (proba > 0.5).astype(pred.dtype))
    np.testing.assert_array_equal(pred, (dec > 0).astype(pred.dtype))
    assert est.score(X_te, Y[60:]) == np.mean(np.all(pred == Y[60:], axis=1))  # subset accuracy


@pytest.mark.parametrize("kind", KINDS)
def test_learns_each_label_above_chance(fitted, kind):
    ests, X, Y = fitted
    proba = ests[kind].predict_proba(X[60:])
    aucs = [roc_auc_score(Y[60:, l], proba[:, l]) for l in range(N_LABELS)]
    assert min(aucs) > 0.8, aucs


# -- the representation of y (check_classifiers_multilabel_representation_invariance) -------------
@pytest.mark.parametrize("kind", KINDS)
def test_representation_invariance(kind):
    X, Y = _task(60)
    Xtr, Ytr = X[:45], Y[:45]
    ref = FACTORIES[kind](max_iter=2).fit(Xtr, Ytr).predict(X[45:])
    for y in (Ytr.tolist(), list(Ytr), sp.csr_matrix(Ytr)):
        pred = FACTORIES[kind](max_iter=2).fit(Xtr, y).predict(X[45:])
        assert type(pred) is type(ref) and pred.dtype == ref.dtype
        np.testing.assert_array_equal(pred, ref)


def test_predict_keeps_the_dtype_of_y():
    X, Y = _task(40)
    for y in (Y.astype(bool), Y.astype(np.float32)):
        est = FACTORIES["ds"](max_iter=2).fit(X, y)
        assert est.predict(X[:5]).dtype == y.dtype


# -- labels that never or always occur ------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_constant_labels(kind):
    X, Y = _task()
    Yc = np.column_stack([Y, np.zeros(len(Y), int), np.ones(len(Y), int)])
    est = FACTORIES[kind](class_weight="balanced").fit(X[:60], Yc[:60])
    assert est.class_weight_[-2:].tolist() == [1.0, 1.0]  # no positive, no negative: weight 1
    pred = est.predict(X[60:])
    assert pred.shape == (30, N_LABELS + 2)
    assert np.all(pred[:, -2] == 0) and np.all(pred[:, -1] == 1)


# -- bad targets ------------------------------------------------------------------------------------
def test_bad_targets_raise_clear_errors():
    X, Y = _task(30)
    est = FACTORIES["ds"](max_iter=1)
    with pytest.raises(ValueError, match="30 sets"):
        est.fit(X, Y[:20])
    with pytest.raises(ValueError, match="multi-label indicator matrix"):
        est.fit(X, Y * 2)  # two values, not 0 and 1
    with pytest.raises(ValueError, match="multi-label indicator matrix"):
        est.fit(X, Y + Y[:, ::-1])  # 2-D of three values: multi-output multiclass
    with pytest.raises(ValueError, match="shape"):
        est.fit(X, Y[:, :, None])
    est.fit(X, Y)
    for y, msg in ((Y[:, :2], "2 labels but the first fit had 3"),
                   (Y[:, 0], "fitted on multi-label targets")):
        with pytest.raises(ValueError, match=msg):
            est.partial_fit(X, y)
        with pytest.raises(ValueError, match=msg):
            FACTORIES["ds"](max_iter=1, warm_start=True).fit(X, Y).fit(X, y)
    single = FACTORIES["ds"](max_iter=1).fit(X, Y[:, 0])
    with pytest.raises(ValueError, match="fitted on single-label targets"):
        single.partial_fit(X, Y)
    with pytest.raises(ValueError, match="class_weight has 2 weights but y has 3 labels"):
        FACTORIES["ds"](max_iter=1, class_weight=[1.0, 2.0]).fit(X, Y)
    with pytest.raises(ValueError, match="class_weight has keys"):
        FACTORIES["ds"](max_iter=1, class_weight={5: 2.0}).fit(X, Y)
    with pytest.raises(ValueError, match="class_weight="):
        FACTORIES["ds"](max_iter=1, class_weight=[1.0, -2.0, 1.0]).fit(X, Y)


def test_inputs_not_modified():
    X, Y = _task(30)
    X0, Y0 = [s.copy() for s in X], Y.copy()
    FACTORIES["ds"](max_iter=1, class_weight="balanced").fit(X, Y)
    np.testing.assert_array_equal(Y, Y0)
    assert all(np.array_equal(a, b) for a, b in zip(X, X0))


# -- the loss, the class weights and the validation score against independent references ---------
def test_loss_and_balanced_weights_against_a_naive_loop():
    X, Y = _task(40)
    Y[:, 2] = 0
    Y[:3, 2] = 1  # a rare label
    est = FACTORIES["ds"](max_iter=1, class_weight="balanced").fit(X, Y)
    n_pos = Y.sum(0)
    np.testing.assert_allclose(est.class_weight_, (len(Y) - n_pos) / n_pos)
    rng = np.random.default_rng(1)
    logits = rng.normal(size=Y.shape)
    w = rng.random(len(Y))
    expected = 0.0
    for i in range(len(Y)):
        for l in range(N_LABELS):
            p = 1 / (1 + np.exp(-logits[i, l]))
            expected += w[i] * -(est.class_weight_[l] * Y[i, l] * np.log(p)
                                 + (1 - Y[i, l]) * np.log(1 - p))
    expected /= w.sum()
    got = est._task_loss(torch.tensor(logits), torch.tensor(Y, dtype=torch.float64),
                         torch.tensor(w))
    np.testing.assert_allclose(float(got), expected, rtol=1e-10)


def test_explicit_weights_dict_and_array_agree():
    X, Y = _task(40)
    a = FACTORIES["ds"](max_iter=2, class_weight=[1.0, 3.0, 0.5]).fit(X, Y)
    b = FACTORIES["ds"](max_iter=2, class_weight={1: 3.0, 2: 0.5}).fit(X, Y)
    np.testing.assert_array_equal(a.class_weight_, [1.0, 3.0, 0.5])
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))


def test_single_label_class_weight_is_sklearn_weighted_log_loss():
    X, Y = _task(40)
    y = np.where(Y[:, 0] == 1, "a", np.where(Y[:, 1] == 1, "b", "c"))
    est = FACTORIES["ds"](max_iter=1, class_weight="balanced").fit(X, y)
    assert est._multilabel is False and est.predict(X).dtype == y.dtype
    counts = np.array([np.sum(y == c) for c in est.classes_])
    np.testing.assert_allclose(est.class_weight_, len(y) / (3 * counts))
    logits = torch.tensor(np.random.default_rng(2).normal(size=(40, 3)))
    codes = np.searchsorted(est.classes_, y)
    sw = np.random.default_rng(3).random(40)
    got = est._task_loss(logits, torch.tensor(codes), torch.tensor(sw))
    proba = torch.softmax(logits, 1).numpy()
    ref = log_loss(codes, proba, sample_weight=sw * est.class_weight_[codes], labels=[0, 1, 2])
    np.testing.assert_allclose(float(got), ref, rtol=1e-10)
    # and without class_weight the loss is the plain mean cross-entropy, as before
    plain = FACTORIES["ds"](max_iter=1).fit(X, y)
    assert plain.class_weight_ is None
    np.testing.assert_allclose(float(plain._task_loss(logits, torch.tensor(codes))),
                               log_loss(codes, proba, labels=[0, 1, 2]), rtol=1e-10)


@pytest.mark.parametrize("weighted", [False, True])
def test_mean_average_precision_is_sklearns(weighted):
    rng = np.random.default_rng(0)
    Y = (rng.random((50, 5)) < 0.3).astype(float)
    Y[:, 4] = 0  # no positive: left out of the mean
    S = np.round(rng.normal(size=(50, 5)), 1)  # ties
    w = rng.random(50) if weighted else None
    ref = np.mean([average_precision_score(Y[:, l], S[:, l], sample_weight=w) for l in range(4)])
    got = mean_average_precision(torch.tensor(S), torch.tensor(Y),
                                 None if w is None else torch.tensor(w))
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    assert mean_average_precision(torch.tensor(S), torch.zeros(50, 5)) == 0.0


def test_early_stopping_scores_mean_average_precision():
    X, Y = _task()
    est = FACTORIES["ds"](early_stopping=True, validation_fraction=0.3, max_iter=15).fit(X, Y)
    assert all(0.0 <= s <= 1.0 for s in est.validation_scores_)
    assert est.best_validation_score_ == max(est.validation_scores_)


def test_validation_split_on_label_sets():
    rng = np.random.default_rng(0)
    Y = rng.integers(0, 2, size=(200, 2))  # four label sets, each common: stratified
    tr, va = split_validation(200, 0.25, y=Y, stratify=True, seed=0)
    assert len(va) == 50 and len(np.intersect1d(tr, va)) == 0
    sets_all = np.unique(Y, axis=0, return_counts=True)[1] / 200
    sets_va = np.unique(Y[va], axis=0, return_counts=True)[1] / 50
    np.testing.assert_allclose(sets_va, sets_all, atol=0.02)
    Y = rng.integers(0, 2, size=(40, 12))  # nearly every label set unique: a plain split
    tr, va = split_validation(40, 0.2, y=Y, stratify=True, seed=0)
    assert len(va) == 8 and len(tr) == 32


# -- OTK's closed-form head --------------------------------------------------------------------------
@pytest.mark.parametrize("weighted", [False, True])
def test_multilabel_head_is_per_label_logistic_regression(weighted):
    rng = np.random.default_rng(0)
    n, D, L, alpha = 80, 6, 4, 0.05
    Z = rng.normal(size=(n, D))
    Y = (Z @ rng.normal(size=(D, L)) + rng.normal(size=(n, L)) > 0).astype(float)
    w = rng.random(n) + 0.2 if weighted else np.ones(n)
    head = torch.nn.Linear(D, L, dtype=torch.float64)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
    fit_multilabel_logistic_head(head, torch.tensor(Z), torch.tensor(Y), alpha, max_iter=500,
                                 weight=torch.tensor(w) if weighted else None)
    for l in range(L):
        # mean_i w_i BCE_i / sum(w) + alpha/2 |w|^2  ==  (C sum_i w_i BCE_i + |w|^2 / 2) / C'
        lr = LogisticRegression(C=1 / (alpha * w.sum()), tol=1e-12, max_iter=10_000)
        lr.fit(Z, Y[:, l], sample_weight=w)
        np.testing.assert_allclose(head.weight[l].detach().numpy(), lr.coef_[0], atol=2e-5)
        np.testing.assert_allclose(float(head.bias[l].detach()), lr.intercept_[0], atol=2e-5)


def test_multilabel_head_pos_weight_is_duplicated_positives():
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(30, 3))
    Y = (rng.random((30, 2)) < 0.3).astype(float)
    heads = [torch.nn.Linear(3, 2, dtype=torch.float64) for _ in range(2)]
    for h in heads:
        with torch.no_grad():
            h.weight.zero_()
            h.bias.zero_()
    # pos_weight 3 on label 0 == sample weights 3 on its positives (label 0 alone)
    fit_multilabel_logistic_head(heads[0], torch.tensor(Z), torch.tensor(Y), 0.01, max_iter=500,
                                 pos_weight=torch.tensor([3.0, 1.0]))
    sw = np.where(Y[:, 0] == 1, 3.0, 1.0)
    lr = LogisticRegression(C=1 / (0.01 * 30), tol=1e-12, max_iter=10_000)
    lr.fit(Z, Y[:, 0], sample_weight=sw)
    np.testing.assert_allclose(heads[0].weight[0].detach().numpy(), lr.coef_[0], atol=2e-5)


# -- partial_fit, save / load, export, inspection ------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_partial_fit(kind):
    X, Y = _task()
    est = FACTORIES[kind]()
    est.partial_fit(X[:30], Y[:30])  # no classes needed: the width of y fixes the labels
    assert est.classes_.tolist() == [0, 1, 2] and est.n_iter_ == 1
    est.partial_fit(X[30:60], Y[30:60])
    assert est.n_iter_ == 2 and est.predict(X[60:]).shape == (30, N_LABELS)
    FACTORIES[kind]().partial_fit(X[:30], Y[:30], classes=[0, 1, 2])
    with pytest.raises(ValueError, match="classes"):
        FACTORIES[kind]().partial_fit(X[:30], Y[:30], classes=["a", "b", "c"])
    # skset.utils.partial_fit (and skset.distributed.fit through it) takes the same first chunk
    # without classes (it asked for them): the model is the estimator's own partial_fit's
    own = FACTORIES[kind]().partial_fit(X[:30], Y[:30])
    streamed = skset.utils.partial_fit(FACTORIES[kind](), X[:30], Y[:30])
    np.testing.assert_array_equal(streamed.predict_proba(X[60:]), own.predict_proba(X[60:]))
    with pytest.raises(ValueError, match="pass classes="):  # single-label still asks
        skset.utils.partial_fit(FACTORIES[kind](), X[:30], Y[:30, 0])


@pytest.mark.parametrize("kind", KINDS)
def test_save_load_round_trip(fitted, kind):
    ests, X, _ = fitted
    for est in (ests[kind], FACTORIES[kind](max_iter=1, class_weight={0: 2.0}).fit(X, _task()[1])):
        buf = io.BytesIO()
        skset.save(est, buf)
        buf.seek(0)
        loaded = skset.load(buf)
        assert loaded._multilabel and loaded.get_params() == est.get_params()
        np.testing.assert_array_equal(loaded.class_weight_ if est.class_weight_ is not None
                                      else [], est.class_weight_ if est.class_weight_ is not None
                                      else [])
        for m in ("predict", "predict_proba", "decision_function"):
            np.testing.assert_array_equal(getattr(loaded, m)(X[60:]), getattr(est, m)(X[60:]))
        assert loaded.predict(X[:3]).dtype == est.predict(X[:3]).dtype


@pytest.mark.parametrize("kind", KINDS)
def test_serving_module_and_program(fitted, kind):
    from skset import export as sx

    ests, X, _ = fitted
    est, X_te = ests[kind], X[60:]
    assert sx._output_names(est) == ["decision_function", "predict_proba", "predict", "transform"]
    x, mask = sx.pad_sets(X_te, dtype=np.float32)
    for module in (sx.serving_module(est), sx.export_program(est).module()):
        dec, proba, pred, z = (t.detach().numpy() for t in module(torch.tensor(x),
                                                                   torch.tensor(mask)))
        np.testing.assert_allclose(dec, est.decision_function(X_te), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(proba, est.predict_proba(X_te), rtol=1e-4, atol=1e-6)
        np.testing.assert_array_equal(pred, est.predict(X_te))
        np.testing.assert_allclose(z, est.transform(X_te), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_onnx(fitted, kind, tmp_path):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from skset import export as sx

    ests, X, _ = fitted
    est, X_te = ests[kind], X[60:]
    path = sx.export_onnx(est, tmp_path / "m.onnx", dynamo=False)
    out = sx.run_onnx(path, X_te)
    np.testing.assert_allclose(out["predict_proba"], est.predict_proba(X_te), rtol=1e-4,
                               atol=1e-6)
    np.testing.assert_array_equal(out["predict"], est.predict(X_te))


def test_attention_weights_of_a_multilabel_model(fitted):
    ests, X, _ = fitted
    weights = ests["st"].attention_weights(X[60:63])
    assert len(weights) == 3
    for s, w in zip(X[60:63], weights):
        assert w["pool"].shape == (2, 1, len(s))
        np.testing.assert_allclose(w["pool"].sum(-1), 1.0, rtol=1e-5)


def test_user_guide_example_runs():
    """The code block of the user guide's multi-label section runs as written."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "user_guide" / "index.rst").read_text()
    section = text[text.index("Multi-label targets\n====="):]
    code = re.search(r"\.\. code-block:: python\n\n(.*?)\n\n(?=\S)", section, re.S).group(1)
    namespace = {}
    exec(compile(code.replace("\n    ", "\n").strip(), "index.rst", "exec"), namespace)
    clf, X = namespace["clf"], namespace["X"]
    assert clf.classes_.tolist() == [0, 1, 2]
    assert clf.predict_proba(X[60:]).shape == clf.predict(X[60:]).shape == (20, 3)


def test_single_label_class_weight_is_sample_weight_in_the_loss():
    """Without the statistics of the data that sample_weight weighs (standardize=False, and
    pooling="sum": the default pooling="sized_mean"'s training size counts a set of weight k
    k times), class_weight={c: w} trains exactly as sample_weight w on the sets of class c: the
    weights enter only the loss."""
    X, Y = _task(40)
    y = Y[:, 0]
    kw = dict(standardize=False, pooling="sum", max_iter=5)
    a = FACTORIES["ds"](class_weight={1: 3.0}, **kw).fit(X, y)
    b = FACTORIES["ds"](**kw).fit(X, y, sample_weight=np.where(y == 1, 3.0, 1.0))
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), rtol=1e-5, atol=1e-7)
    c = FACTORIES["ds"](**kw).fit(X, y)
    assert not np.allclose(a.predict_proba(X), c.predict_proba(X))


def test_otk_single_label_class_weight_reaches_the_head():
    X, Y = _task(40)
    y = Y[:, 0]
    plain = FACTORIES["otk"](max_iter=1).fit(X, y)
    weighted = FACTORIES["otk"](max_iter=1, class_weight={1: 5.0}).fit(X, y)
    # the positive class weighs more: its predicted probability rises on average
    assert weighted.predict_proba(X)[:, 1].mean() > plain.predict_proba(X)[:, 1].mean()


@pytest.mark.parametrize("multilabel", [False, True])
def test_balanced_class_weight_leaves_out_sets_of_weight_zero(multilabel):
    # sets of sample_weight 0 take no part in the fit, as if removed: "balanced" counts the
    # others (it counted every set)
    X, Y = _task(40)
    y = Y if multilabel else Y[:, 0]
    w = np.ones(40)
    w[np.flatnonzero((Y[:, 0] if multilabel else y) == 0)[:10]] = 0
    kw = dict(class_weight="balanced", max_iter=2)
    a = FACTORIES["ds"](**kw).fit(X, y, sample_weight=w)
    keep = w > 0
    b = FACTORIES["ds"](**kw).fit([x for x, k in zip(X, keep) if k], y[keep])
    np.testing.assert_allclose(a.class_weight_, b.class_weight_)
    assert not np.allclose(a.class_weight_, FACTORIES["ds"](**kw).fit(X, y).class_weight_)


@pytest.mark.parametrize("multilabel", [False, True])
def test_balanced_class_weight_counts_sets_by_their_weight(multilabel):
    # "balanced" counts a set of weight k as k copies, as scikit-learn's compute_class_weight
    # does (it counted each set of positive weight once: [1, 1] for the single-label case below)
    from sklearn.utils.class_weight import compute_class_weight

    X, Y = _task(40)
    y = Y if multilabel else Y[:, 0]
    w = np.where((Y[:, 0] if multilabel else y) == 1, 3.0, 1.0)
    w[:4] = 0.0
    fitted = FACTORIES["ds"](class_weight="balanced", max_iter=1).fit(X, y, sample_weight=w)
    if multilabel:
        pos = w @ Y
        expected = np.where((pos > 0) & (pos < w.sum()), (w.sum() - pos) / np.maximum(pos, 1e-300),
                            1.0)
    else:
        expected = compute_class_weight("balanced", classes=np.unique(y), y=y, sample_weight=w)
    np.testing.assert_allclose(fitted.class_weight_, expected, rtol=1e-12)
    copies = np.repeat(np.arange(40), w.astype(int))
    dup = FACTORIES["ds"](class_weight="balanced", max_iter=1).fit([X[i] for i in copies], y[copies])
    np.testing.assert_allclose(fitted.class_weight_, dup.class_weight_, rtol=1e-12)


def test_nullable_integer_indicator_frame_predicts_an_indicator_scikit_learn_reads():
    # a frame of pandas' nullable Int64 columns arrives as an object array: predict gave Python
    # bools of dtype object, which accuracy_score (score) refused as "unknown" targets
    pd = pytest.importorskip("pandas")
    X, Y = _task(30)
    frame = pd.DataFrame(Y, dtype="Int64")
    clf = FACTORIES["ds"](max_iter=1).fit(X, frame)
    pred = clf.predict(X)
    assert pred.dtype == np.int64 and set(np.unique(pred)) <= {0, 1}
    assert 0.0 <= clf.score(X, Y) <= 1.0
