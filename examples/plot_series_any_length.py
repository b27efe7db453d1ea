"""
Series of any length, read by fixed dilated kernels
===================================================

Each series here is a set of time points in order, of 60 to 600 steps: a noisy baseline with a
few events. In one class the events are triangles, in the other square pulses of the same height
and the same area, so the mean of a series says nothing of its class and its maximum little (a
pulse holds its height for six steps, a triangle for one); the shape of its events does.

:class:`~skset.DilatedKernelFeatures` describes each time point by the responses of 84 fixed
kernels of nine taps around it at several dilations (MiniRocket's kernels), compares them with
thresholds learnt from the training series, and pools by the proportion of the series' points
above each threshold. Series of different lengths are pooled over their own points: nothing is
cut or resampled. It is compared here with mean + max pooling of the raw values (the baseline a
practitioner tries first) and with the default OTK pipeline, which chooses from the labels
whether to read the series as k-mers, and of which width.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.linear_model import LogisticRegression, RidgeClassifierCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from skset import DilatedKernelFeatures, NystromFeatures, OTKEmbedding

rng = np.random.default_rng(0)
WIDTH = 12


def event(kind):
    if kind == 0:  # a triangle of 13 steps peaking at 2: its values sum to 12
        return 2 * (1 - np.abs(np.linspace(-1, 1, WIDTH + 1)))
    return np.full(WIDTH // 2, 2.0)  # a square pulse of 6 steps at 2: the same height and sum


def series(kind):
    n = int(rng.integers(60, 600))
    x = 0.3 * rng.normal(size=n)
    for _ in range(int(rng.integers(2, 6))):
        e = event(kind)
        t = int(rng.integers(0, n - len(e)))
        x[t:t + len(e)] += e
    return x[:, None]


y = np.arange(300) % 2
X = [series(k) for k in y]
X_train, X_test, y_train, y_test = X[:200], X[200:], y[:200], y[200:]


def mean_max(sets):
    return np.stack([np.concatenate([s.mean(0), s.max(0)]) for s in sets])


models = {
    "raw mean + max": make_pipeline(FunctionTransformer(mean_max), StandardScaler(),
                                    LogisticRegression()),
    "OTK pipeline": make_pipeline(NystromFeatures(random_state=0), OTKEmbedding(random_state=0),
                                  LogisticRegression(max_iter=1000)),
    "DilatedKernelFeatures": make_pipeline(DilatedKernelFeatures(random_state=0), StandardScaler(),
                                           RidgeClassifierCV(alphas=np.logspace(-3, 3, 10))),
}
scores = {}
for name, model in models.items():
    scores[name] = model.fit(X_train, y_train).score(X_test, y_test)
    print(f"{name:>22}: test accuracy {scores[name]:.3f}")

# %%
# The kernels read the shape of the events around every point, whatever the series' length, with
# nothing trained but the ridge. The OTK pipeline keeps single time points here (``window_`` is
# 1): the distribution of a series' values tells a pulse's plateau from a triangle's ramp. The
# raw values' mean is the same for both classes and their maximum only a little higher with
# pulses: mean + max pooling scores 0.65 (99 of 100 test series for the other two).
fig, ax = plt.subplots(figsize=(6, 2.5))
ax.barh(list(scores), list(scores.values()), color=["0.6", "tab:blue", "tab:orange"])
ax.set_xlim(0.4, 1.0)
ax.set_xlabel("test accuracy (100 series of 60-600 steps)")
fig.tight_layout()
plt.show()
