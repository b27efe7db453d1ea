"""
What does a Set Transformer attend to?
======================================

``SetTransformerClassifier.attention_weights`` returns, for every set, the attention matrices of
every block (per head, cropped to the set's real elements). On a task where a single element of
each set decides the label, they show where the model looks:

* with no encoder block (``n_layers=0``), the pooling by attention (PMA) must read the label off
  the deciding element, and its weights concentrate there;
* with one self-attention block (SAB) before the pooling, the elements first attend to the
  deciding element and copy what it holds; the pooling can then look anywhere, and the SAB's
  weights are where the deciding element shows.
"""

# %%
# The task: each set holds 5 to 15 elements ``(flag, value)``; exactly one element is flagged,
# and the label is the sign of its value. The other values are noise.
import matplotlib.pyplot as plt
import numpy as np

from skset import SetTransformerClassifier

rng = np.random.default_rng(0)


def make_sets(n_sets):
    X, y, key = [], [], []
    for _ in range(n_sets):
        n = rng.integers(5, 16)
        value = rng.normal(size=n)
        flag = np.zeros(n)
        k = rng.integers(n)
        flag[k] = 1.0
        X.append(np.column_stack([flag, value]))
        y.append(int(value[k] > 0))
        key.append(k)
    return X, np.array(y), np.array(key)


X_train, y_train, _ = make_sets(400)
X_test, y_test, key_test = make_sets(150)

# %%
# Pooling straight from the elements
# ----------------------------------
# ``n_layers=0``: the PMA seed attends to the (embedded) elements. Its weights, averaged over the
# heads, put almost all the mass on the flagged element, far from the uniform ``1/n``.
common = dict(hidden_size=16, n_heads=2, n_inducing=None, max_iter=25,
              learning_rate_init=3e-3, random_state=0)
pooling_only = SetTransformerClassifier(n_layers=0, **common).fit(X_train, y_train)
weights = pooling_only.attention_weights(X_test)
print(sorted(weights[0]))  # one block: the pooling
pool = [w["pool"].mean(axis=0)[0] for w in weights]  # (n_i,): seed 0, mean over heads
on_key = np.array([p[k] for p, k in zip(pool, key_test)])
print(f"accuracy {pooling_only.score(X_test, y_test):.3f}; PMA weight on the flagged element: "
      f"{on_key.mean():.3f} (uniform: {np.mean([1 / len(s) for s in X_test]):.3f})")

fig, axes = plt.subplots(2, 3, figsize=(9, 4.5), sharey=True)
for ax, p, k, s in zip(axes.ravel(), pool, key_test, X_test):
    colors = np.where(np.arange(len(p)) == k, "tab:red", "tab:gray")
    ax.bar(np.arange(len(p)), p, color=colors)
    ax.axhline(1 / len(p), color="k", lw=0.8, ls="--")
    ax.set_title(f"value of flagged: {s[k, 1]:+.2f}", fontsize=9)
    ax.set_xlabel("element")
axes[0, 0].set_ylabel("PMA weight")
axes[1, 0].set_ylabel("PMA weight")
fig.suptitle("n_layers=0: pooling weights (red: the flagged element; dashed: 1/n)")
fig.tight_layout()

# %%
# One self-attention block first
# ------------------------------
# With a SAB before the pooling, the flagged element's value can reach every element, and the
# pooling has no reason to prefer one. The attention that finds the flagged element is now the
# SAB's: the column of the flagged element (the weight each element gives it) stands out.
with_sab = SetTransformerClassifier(n_layers=1, **common).fit(X_train, y_train)
weights = with_sab.attention_weights(X_test)
print(sorted(weights[0]))  # the SAB ("blocks.0") and the pooling
pool_on_key = np.mean([w["pool"].mean(0)[0, k] for w, k in zip(weights, key_test)])
sab_on_key = np.mean([w["blocks.0"].mean(0)[:, k].mean() for w, k in zip(weights, key_test)])
print(f"accuracy {with_sab.score(X_test, y_test):.3f}; weight on the flagged element: "
      f"PMA {pool_on_key:.3f}, SAB (mean over queries) {sab_on_key:.3f}")

i = 0
sab = weights[i]["blocks.0"]  # (n_heads, n, n)
fig, axes = plt.subplots(1, sab.shape[0] + 1, figsize=(10, 3.2))
for h, ax in enumerate(axes[:-1]):
    im = ax.imshow(sab[h], vmin=0, vmax=1, cmap="viridis")
    ax.axvline(key_test[i], color="tab:red", lw=0.8, ls=":")
    ax.set_title(f"SAB head {h}", fontsize=9)
    ax.set_xlabel("key element")
axes[0].set_ylabel("query element")
fig.colorbar(im, ax=axes[:-1], fraction=0.03)
p = weights[i]["pool"].mean(0)[0]
axes[-1].bar(np.arange(len(p)), p,
             color=np.where(np.arange(len(p)) == key_test[i], "tab:red", "tab:gray"))
axes[-1].set_title("PMA weight (mean over heads)", fontsize=9)
axes[-1].set_xlabel("element")
plt.show()

# %%
# The weights of a set are those of the set alone: attention never looks at padding, and the
# estimator standardises the elements (``mean_``, ``scale_``) before computing them, as it does in
# ``predict``.
