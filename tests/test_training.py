"""Tests of the shared training loop and its helpers."""

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning

from skset.neural_network._callbacks import (
    BestCheckpoint,
    Callback,
    EarlyStopping,
    LinearWarmup,
    LowestLossCheckpoint,
    ReduceLROnPlateau,
    Validation,
)
from skset.neural_network._training import (
    check_training_params,
    epoch_batches,
    make_optimizer,
    split_validation,
    standard_callbacks,
    train_module,
)

torch.set_num_threads(1)


def _problem(seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(64, 3, generator=g)
    w = torch.tensor([[1.0], [-2.0], [0.5]])
    y = X @ w
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = torch.nn.Linear(3, 1)
    gen = torch.Generator().manual_seed(seed)

    def batches(epoch):
        perm = torch.randperm(64, generator=gen)
        for i in range(0, 64, 16):
            yield X[perm[i:i + 16]], y[perm[i:i + 16]]

    def loss_fn(m, batch):
        xb, yb = batch
        return torch.nn.functional.mse_loss(m(xb), yb), len(yb)

    return module, loss_fn, batches


def test_loss_decreases_and_result_fields():
    module, loss_fn, batches = _problem()
    res = train_module(module, loss_fn, batches, max_iter=30, learning_rate_init=0.05,
                       warn_convergence=False)
    assert res.n_iter == len(res.loss_curve) <= 30
    assert res.loss_curve[-1] < 0.05 * res.loss_curve[0]
    assert res.validation_scores == []
    assert "state" in res.optimizer_state
    assert not module.training


def test_stops_on_training_loss_plateau():
    module, loss_fn, batches = _problem()
    res = train_module(module, loss_fn, batches, max_iter=500, learning_rate_init=0.05,
                       callbacks=[EarlyStopping("loss", tol=1e-3, patience=3)])
    assert res.converged and res.n_iter < 500


def test_early_stopping_restores_best_weights():
    module, loss_fn, batches = _problem()
    scores = iter([0.1, 0.5, 0.3, 0.2, 0.25, 0.1, 0.0])
    states = []

    def validation(m):
        states.append({k: v.clone() for k, v in m.state_dict().items()})
        return next(scores)

    res = train_module(module, loss_fn, batches, max_iter=10,
                       callbacks=standard_callbacks(validation, early_stopping=True,
                                                    n_iter_no_change=3, tol=0.0))
    assert res.n_iter == 5  # best at epoch 2, then 3 epochs without improvement
    assert res.validation_scores == [0.1, 0.5, 0.3, 0.2, 0.25]
    assert res.best_score == 0.5
    for k, v in module.state_dict().items():
        torch.testing.assert_close(v, states[1][k])
    assert not torch.equal(module.weight, states[-1]["weight"])


def test_early_stopping_needs_validation():
    module, loss_fn, batches = _problem()
    with pytest.raises(ValueError, match="validation"):
        standard_callbacks(None, early_stopping=True)
    for cb in (EarlyStopping("validation"), BestCheckpoint()):
        with pytest.raises(ValueError, match="Validation callback"):
            train_module(module, loss_fn, batches, max_iter=2, callbacks=[cb])


def test_validation_callback_sets_score_and_loss():
    module, loss_fn, batches = _problem()
    seen = []

    class Reader(EarlyStopping):  # reads what Validation set, in the same epoch
        def on_epoch_end(self, state):
            seen.append((state.score, state.validation_loss, state.module.training))

    res = train_module(module, loss_fn, batches, max_iter=3, warn_convergence=False,
                       callbacks=[Validation(lambda m: (0.5, 2.0)), Reader()])
    assert seen == [(0.5, 2.0, False)] * 3 and res.validation_scores == [0.5] * 3
    seen.clear()
    train_module(module, loss_fn, batches, max_iter=1, warn_convergence=False,
                 callbacks=[Validation(lambda m: 0.25), Reader()])
    assert seen == [(0.25, None, False)]
    # without Validation the loop runs max_iter epochs and scores nothing
    res = train_module(module, loss_fn, batches, max_iter=4, warn_convergence=False)
    assert res.n_iter == 4 and res.validation_scores == [] and res.best_state is None


def test_parameters_left_out_are_not_trained():
    module, loss_fn, batches = _problem()
    bias = module.bias.detach().clone()
    train_module(module, loss_fn, batches, max_iter=2, warn_convergence=False,
                 parameters=[module.weight])
    assert torch.equal(module.bias.detach(), bias)


def test_warm_start_optimizer_state_resumes():
    module, loss_fn, batches = _problem()
    r1 = train_module(module, loss_fn, batches, max_iter=3, warn_convergence=False)
    r2 = train_module(module, loss_fn, batches, max_iter=3, optimizer_state=r1.optimizer_state,
                      warn_convergence=False)
    step = next(iter(r2.optimizer_state["state"].values()))["step"]
    assert float(step) == 24  # 2 calls x 3 epochs x 4 batches: the Adam state carried over


def test_nan_loss_raises_clearly():
    module, _, batches = _problem()
    with pytest.raises(FloatingPointError, match="learning_rate_init"):
        train_module(module, lambda m, b: m(b[0]).sum() * float("nan"), batches, max_iter=2)


def test_convergence_warning_and_verbose(capsys):
    module, loss_fn, batches = _problem()
    with pytest.warns(ConvergenceWarning, match="maximum iterations"):
        train_module(module, loss_fn, batches, max_iter=2, verbose=1, name="Net",
                     callbacks=standard_callbacks())
    out = capsys.readouterr().out
    assert out.count("Net: epoch") == 2 and "loss =" in out


def test_optimizers():
    p = [torch.nn.Parameter(torch.zeros(2))]
    assert isinstance(make_optimizer(p, "adam"), torch.optim.Adam)
    assert isinstance(make_optimizer(p, "adamw", weight_decay=0.1), torch.optim.AdamW)
    with pytest.raises(ValueError, match="optimizer"):
        make_optimizer(p, "sgd")


def test_epoch_batches_cover_budget_and_determinism():
    lengths = np.array([5, 100, 7, 50, 50, 3, 90, 8, 8, 8])
    b1 = epoch_batches(lengths, batch_size=3, max_elements=200,
                       generator=torch.Generator().manual_seed(0))
    b2 = epoch_batches(lengths, batch_size=3, max_elements=200,
                       generator=torch.Generator().manual_seed(0))
    assert [b.tolist() for b in b1] == [b.tolist() for b in b2]
    assert sorted(np.concatenate(b1).tolist()) == list(range(10))
    for b in b1:
        assert len(b) <= 3 and (len(b) == 1 or len(b) * lengths[b].max() <= 200)
    # equal lengths get different companions from epoch to epoch
    gen = torch.Generator().manual_seed(0)
    same = np.full(12, 10)
    e1 = [tuple(sorted(b)) for b in epoch_batches(same, batch_size=4, max_elements=None,
                                                  generator=gen)]
    e2 = [tuple(sorted(b)) for b in epoch_batches(same, batch_size=4, max_elements=None,
                                                  generator=gen)]
    assert set(e1) != set(e2)


def test_split_validation():
    y = np.array([0] * 30 + [1] * 10)
    tr, va = split_validation(40, 0.25, y=y, stratify=True, seed=0)
    assert len(va) == 10 and len(tr) == 30 and not set(tr) & set(va)
    assert (y[va] == 1).sum() in (2, 3)  # stratified: a quarter of the 10 minority sets
    tr2, va2 = split_validation(40, 0.25, y=y, stratify=True, seed=0)
    assert np.array_equal(va, va2)
    # a class too rare to stratify: falls back to a plain split
    y_rare = np.array([0] * 39 + [1])
    tr, va = split_validation(40, 0.1, y=y_rare, stratify=True, seed=0)
    assert len(va) == 4
    with pytest.raises(ValueError, match="empty"):
        split_validation(1, 0.5)


class _Est:
    max_iter = 10
    batch_size = 4
    learning_rate_init = 1e-3
    tol = 1e-4
    n_iter_no_change = 5
    alpha = 0.0
    validation_fraction = 0.1
    optimizer = "adam"
    verbose = 0


@pytest.mark.parametrize("attr, value, match", [
    ("max_iter", 0, "max_iter"), ("batch_size", 1.5, "batch_size"),
    ("learning_rate_init", 0.0, "learning_rate_init"), ("tol", -1, "tol"),
    ("alpha", float("nan"), "alpha"), ("validation_fraction", 1.0, "validation_fraction"),
    ("optimizer", "sgd", "optimizer"), ("verbose", -1, "verbose"),
    ("n_iter_no_change", 0, "n_iter_no_change"),
])
def test_check_training_params(attr, value, match):
    est = _Est()
    check_training_params(est)
    setattr(est, attr, value)
    with pytest.raises(ValueError, match=match):
        check_training_params(est)


# -- callbacks ----------------------------------------------------------------------------------
def _plateau_run(losses, **kw):
    """ReduceLROnPlateau fed a scripted monitored loss; returns the learning rate of each epoch."""
    module, loss_fn, batches = _problem()
    cb = ReduceLROnPlateau(lambda state: losses[state.epoch], **kw)
    res = train_module(module, loss_fn, batches, max_iter=len(losses), learning_rate_init=1.0,
                       warn_convergence=False, callbacks=[cb])
    return res.learning_rates


def test_reduce_on_plateau_never_halves_a_falling_loss():
    # the defect of the first adaptive schedule: from best = inf, "best - tol * best" was nan and
    # every epoch counted as stalled, halving the rate every 5 epochs whatever the loss did
    assert _plateau_run([0.9**e for e in range(20)]) == [1.0] * 20


def test_reduce_on_plateau_halves_a_stalled_loss():
    lrs = _plateau_run([1.0] * 12, patience=5, factor=0.5)
    assert lrs == [1.0] * 6 + [0.5] * 5 + [0.25]
    # relative tolerance: tiny decreases are no progress; a real decrease resets the count
    assert _plateau_run([1.0 - 1e-7 * e for e in range(7)], tol=1e-4) == [1.0] * 6 + [0.5]
    assert _plateau_run([3.0] * 4 + [2.0] * 8) == [1.0] * 10 + [0.5] * 2


def test_callbacks_run_in_order_and_can_stop():
    calls = []

    class Recorder(Callback):
        def on_train_begin(self, state):
            calls.append("begin")

        def on_epoch_begin(self, state):
            calls.append(f"e{state.epoch}")

        def on_epoch_end(self, state):
            calls.append(f"end{state.epoch}:{state.epoch_loss > 0}")
            if state.epoch == 2:
                state.stop = True

        def on_train_end(self, state):
            calls.append("done")

    module, loss_fn, batches = _problem()
    res = train_module(module, loss_fn, batches, max_iter=10, callbacks=[Recorder()])
    assert calls == ["begin", "e0", "end0:True", "e1", "end1:True", "e2", "end2:True", "done"]
    assert res.n_iter == 3 and res.converged and len(res.learning_rates) == 3


def test_early_stopping_restores_the_best_checkpoint():
    module, loss_fn, batches = _problem()
    scores = [0.1, 0.5, 0.3, 0.2, 0.1, 0.0]
    snapshots = []

    def validation(m):
        snapshots.append(m.weight.detach().clone())
        return scores[len(snapshots) - 1]

    res = train_module(module, loss_fn, batches, max_iter=6, learning_rate_init=0.05,
                       callbacks=standard_callbacks(validation, early_stopping=True,
                                                    n_iter_no_change=3))
    assert res.n_iter == 5 and res.best_score == 0.5
    torch.testing.assert_close(module.weight.detach(), snapshots[1])  # epoch 2's weights


def test_linear_warmup_ramps_then_leaves_the_rate_alone():
    seen = []

    class Recorder(Callback):
        def on_batch_begin(self, state):
            seen.append((state.step, state.optimizer.param_groups[0]["lr"]))

    module, loss_fn, batches = _problem()  # 4 batches per epoch
    res = train_module(module, loss_fn, batches, max_iter=3, learning_rate_init=0.8,
                       warn_convergence=False, callbacks=[LinearWarmup(6), Recorder()])
    assert [s for s, _ in seen] == list(range(12))
    np.testing.assert_allclose([lr for _, lr in seen],
                               [0.8 * k / 6 for k in range(1, 7)] + [0.8] * 6)
    assert res.learning_rates == [0.8 * 4 / 6, 0.8, 0.8]
    # a warm-up of 0 steps changes nothing; a negative one is refused
    seen.clear()
    module, loss_fn, batches = _problem()
    train_module(module, loss_fn, batches, max_iter=1, learning_rate_init=0.8,
                 warn_convergence=False, callbacks=[LinearWarmup(0), Recorder()])
    assert [lr for _, lr in seen] == [0.8] * 4
    with pytest.raises(ValueError, match="n_steps"):
        LinearWarmup(-1)


def test_linear_warmup_then_plateau_schedule():
    module, loss_fn, batches = _problem()
    res = train_module(module, loss_fn, batches, max_iter=8, learning_rate_init=1.0,
                       warn_convergence=False,
                       callbacks=[LinearWarmup(2),
                                  ReduceLROnPlateau(lambda s: 1.0, patience=3, factor=0.5)])
    # the warm-up is over within the first epoch; the plateau rule then halves every 3 epochs
    assert res.learning_rates == [1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25]


def test_lowest_loss_checkpoint_restores_the_best_epoch():
    """The weights at the end of the epoch of lowest training loss are loaded at the end: a
    callback that wrecks the weights before the last two epochs makes their losses the highest,
    and the module ends as it was after the best epoch (a copy, not a reference)."""
    module, loss_fn, batches = _problem()
    states = []

    class Wreck(Callback):
        def on_epoch_begin(self, state):
            if state.epoch == 4:
                with torch.no_grad():
                    state.module.weight.add_(10.0)

        def on_epoch_end(self, state):
            states.append({k: v.clone() for k, v in state.module.state_dict().items()})

    res = train_module(module, loss_fn, batches, max_iter=6, warn_convergence=False,
                       callbacks=[Wreck(), LowestLossCheckpoint()])
    best = int(np.argmin(res.loss_curve))
    assert best == 3 and res.loss_curve[-1] > 10 * res.loss_curve[best]
    for k, v in module.state_dict().items():
        assert torch.equal(v, states[best][k])
    # a fit that only improves ends with its last weights
    module, loss_fn, batches = _problem()
    res = train_module(module, loss_fn, batches, max_iter=4, warn_convergence=False,
                       callbacks=[Wreck(), LowestLossCheckpoint()])
    assert int(np.argmin(res.loss_curve)) == 3
    assert torch.equal(module.weight, states[-1]["weight"])


def test_warm_starts_keep_the_best_weights_and_restart_the_rate():
    """A warm start with early stopping keeps the best validation score so far and its weights
    (a refit that only got worse ended with its worse weights, and reported their score); a
    warm ``fit`` starts again at ``learning_rate_init`` (an adaptive schedule's lowered rate
    was kept, even with ``learning_rate="constant"``)."""
    import warnings

    import skset

    warnings.simplefilter("ignore")
    rng = np.random.default_rng(0)
    y = np.arange(90) % 2
    X = [rng.normal(loc=1.5 * c, size=(int(rng.integers(3, 8)), 2)) for c in y]
    m = skset.DeepSetsClassifier(hidden_size=8, max_iter=30, early_stopping=True,
                                 random_state=0).fit(X, y)
    best, proba = m.best_validation_score_, m.predict_proba(X)
    m.set_params(warm_start=True, learning_rate_init=0.3, max_iter=6).fit(X, y)
    assert max(m.validation_scores_[-6:]) <= best  # no warm epoch beats it: the weights kept
    assert m.best_validation_score_ == best == max(m.validation_scores_)
    np.testing.assert_array_equal(m.predict_proba(X), proba)

    y, X = y[:40], X[:40]
    kw = dict(n_components=4, n_supports=2, tol=1e9, random_state=0)  # no epoch is progress
    fitted = skset.OTKClassifier(max_iter=12, **kw).fit(X, y)
    assert fitted.learning_rates_[-1] < 0.01
    fitted.set_params(warm_start=True, learning_rate="constant", max_iter=3).fit(X, y)
    assert fitted.learning_rates_[-3:] == [0.01] * 3


def _warm_data(n=80, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    return [rng.normal(loc=0.8 * c, size=(int(rng.integers(3, 8)), 2)) for c in y], y


def test_a_fit_without_validation_drops_the_best_score_it_no_longer_has():
    # a warm fit without early stopping moved the weights but kept the old best score: the next
    # warm fit with early stopping took the moved weights for that best and kept them, reporting
    # a score they never reached
    import warnings

    import skset

    X, y = _warm_data()
    m = skset.DeepSetsClassifier(hidden_size=8, max_iter=20, early_stopping=True,
                                 validation_fraction=0.3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(X, y)
        assert m.best_validation_score_ is not None
        m.set_params(warm_start=True, early_stopping=False, learning_rate_init=0.5, max_iter=5)
        m.fit(X, y)
        assert m.best_validation_score_ is None
        m.set_params(early_stopping=True, learning_rate_init=1e-9, max_iter=3).fit(X, y)
    assert m.best_validation_score_ == max(m.validation_scores_[-3:])


def test_an_interrupted_warm_fit_leaves_the_network_as_it_was(monkeypatch):
    import skset

    X, y = _warm_data(40)
    m = skset.DeepSetsClassifier(hidden_size=8, max_iter=3, random_state=0)
    with pytest.warns(ConvergenceWarning):
        m.fit(X, y)
    proba, n_iter = m.predict_proba(X), m.n_iter_
    calls, real = [], type(m)._task_loss

    def interrupted(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # after one optimisation step
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(type(m), "_task_loss", interrupted)
    with pytest.raises(KeyboardInterrupt):
        m.set_params(warm_start=True).fit(X, y)
    monkeypatch.undo()
    assert m.n_iter_ == n_iter
    np.testing.assert_array_equal(m.predict_proba(X), proba)  # the weights it had


def test_otk_classifier_keeps_adams_moments_between_fit_and_partial_fit():
    # the fit trains without the head (refitted in closed form), partial_fit with it: torch
    # refused the saved state of another length and Adam started afresh, at learning_rate_init
    import warnings

    import skset

    X, y = _warm_data(40)
    c = skset.OTKClassifier(n_components=4, n_supports=2, max_iter=4, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        c.fit(X, y)
    fit_names = list(c._optimizer_param_names)
    steps = {n: int(c._optimizer_state["state"][i]["step"]) for i, n in enumerate(fit_names)}
    assert not any(n.startswith("head.") for n in fit_names) and min(steps.values()) > 0
    c.partial_fit(X[:20], y[:20])
    names = list(c._optimizer_param_names)
    assert any(n.startswith("head.") for n in names)
    after = {n: int(c._optimizer_state["state"][i]["step"]) for i, n in enumerate(names)}
    for n, s in steps.items():  # one more step each (20 sets: one batch), not a fresh count
        assert after[n] == s + 1, n
    assert c.learning_rates_[-1] == c.learning_rates_[-2]  # the rate the fit left


def test_verbose_numbers_the_epochs_as_n_iter_counts_them(capsys):
    import warnings

    import skset

    X, y = _warm_data(40)
    m = skset.DeepSetsClassifier(hidden_size=8, max_iter=2, verbose=1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(X, y)
        m.set_params(warm_start=True).fit(X, y)
        m.partial_fit(X, y)
    epochs = [int(line.split("epoch ")[1].split(",")[0]) for line in capsys.readouterr().out.splitlines()
              if "epoch " in line and "loss" in line]
    assert epochs == [1, 2, 3, 4, 5] and m.n_iter_ == 5


def test_an_interrupted_choice_of_the_shrinkage_leaves_the_regressor_as_it_was(monkeypatch):
    # the warm fit's undo covered the training only: interrupted while the regressor chose its
    # output shrinkage, the network kept the new weights beside the old attributes
    import warnings

    import skset
    from skset.neural_network import _tasks

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(3, 8)), 2)) for _ in range(60)]
    y = np.array([x.mean() for x in X])
    m = skset.DeepSetsRegressor(hidden_size=8, max_iter=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(X, y)
    pred = m.predict(X)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(_tasks, "validated_shrinkage", interrupted)
    with pytest.raises(KeyboardInterrupt), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.set_params(warm_start=True).fit(X, y)
    monkeypatch.undo()
    np.testing.assert_array_equal(m.predict(X), pred)
