"""
OTK embedding vs mean pooling as the number of supports grows
=============================================================

The simplest way to turn a set of element features into one vector is to average them (mean
pooling). The optimal transport kernel embedding keeps ``p`` pooled vectors instead of one, each
the mean of the elements that the transport plan sends to one support of a learned reference;
with ``p = 1`` it is mean pooling again (centred and rescaled).

This example measures the test accuracy of a logistic regression on both representations of the
Japanese Vowels utterances (9 speakers, sets of 7 to 29 frames), for a growing number of supports
``p`` (the raw coefficients averaged over seeds, since the k-means reference depends on the seed;
the Nystrom features at one seed, for the example's run time). It
does so on two element representations: the raw (standardised) LPC coefficients, and Nystrom
features of a Gaussian kernel (:class:`~skset.NystromFeatures`), the paper's pipeline.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from skset import NystromFeatures, OTKEmbedding
from skset.datasets import load_japanese_vowels

X_train, y_train = load_japanese_vowels(subset="train", return_X_y=True)
X_test, y_test = load_japanese_vowels(subset="test", return_X_y=True)

# standardise the 12 coefficients with the training frames' statistics
frames = np.concatenate(X_train)
mu, sd = frames.mean(axis=0), frames.std(axis=0)
X_train = [(s - mu) / sd for s in X_train]
X_test = [(s - mu) / sd for s in X_test]


def mean_pool(sets):
    return np.stack([s.mean(axis=0) for s in sets])


def accuracies(F_train, F_test, supports, seed):
    """Test accuracy of mean pooling and of OTK with each number of supports."""
    mean_model = make_pipeline(FunctionTransformer(mean_pool), StandardScaler(),
                               LogisticRegression(max_iter=2000))
    acc_mean = mean_model.fit(F_train, y_train).score(F_test, y_test)
    acc_otk = []
    for p in supports:
        model = make_pipeline(OTKEmbedding(n_supports=p, epsilon=0.5, random_state=seed),
                              LogisticRegression(max_iter=2000))
        acc_otk.append(model.fit(F_train, y_train).score(F_test, y_test))
    return acc_mean, acc_otk


supports = [1, 2, 4, 8, 16]

# %%
# Raw elements
# ------------
# On the raw coefficients mean pooling keeps only the average spectrum of an utterance. The OTK
# embedding with a few supports keeps several "parts" of it. (With one support it differs from
# the mean-pooling model only in its scaling: one norm for the whole vector instead of one
# standard deviation per feature.)
seeds = [0, 1, 2, 3, 4]
raw = [accuracies(X_train, X_test, supports, seed) for seed in seeds]
raw_mean = np.array([r[0] for r in raw])
raw_otk = np.array([r[1] for r in raw])
print(f"raw elements, mean pooling: {raw_mean.mean():.3f}")
for p, acc in zip(supports, raw_otk.mean(0)):
    print(f"raw elements, OTK with {p:2d} supports: {acc:.3f}")

# %%
# Nystrom features
# ----------------
# With 64 Nystrom features of a Gaussian kernel, mean pooling becomes a kernel mean embedding,
# which already describes the whole distribution of frames; OTK has less to add.
nys_seeds = [0]
nys = []
for seed in nys_seeds:
    nystrom = NystromFeatures(n_components=64, random_state=seed).fit(X_train)
    nys.append(accuracies(nystrom.transform(X_train), nystrom.transform(X_test), supports, seed))
nys_mean = np.array([r[0] for r in nys])
nys_otk = np.array([r[1] for r in nys])
print(f"Nystrom features, mean pooling: {nys_mean.mean():.3f}")
for p, acc in zip(supports, nys_otk.mean(0)):
    print(f"Nystrom features, OTK with {p:2d} supports: {acc:.3f}")

# %%
# Accuracy against the number of supports
# ---------------------------------------
fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True, constrained_layout=True)
for ax, acc_otk, acc_mean, title in [
        (axes[0], raw_otk, raw_mean, f"raw elements ({len(seeds)} seeds)"),
        (axes[1], nys_otk, nys_mean, f"64 Nystrom features ({len(nys_seeds)} seed)")]:
    ax.errorbar(supports, acc_otk.mean(0), yerr=acc_otk.std(0), marker="o", capsize=3,
                label="OTK embedding")
    ax.axhline(acc_mean.mean(), color="C1", linestyle="--", label="mean pooling")
    ax.set_xscale("log", base=2)
    ax.set_xticks(supports, [str(p) for p in supports])
    ax.set_xlabel("number of supports p")
    ax.set_title(title)
    ax.grid(alpha=0.3)
axes[0].set_ylabel("test accuracy")
axes[0].legend(loc="lower right")
fig.suptitle("Japanese Vowels: pooling + logistic regression")
plt.show()
