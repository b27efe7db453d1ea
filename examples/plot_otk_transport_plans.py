"""
Transport plans: which frames pool together
===========================================

:class:`~skset.OTKEmbedding` aligns every set with a reference of ``p`` supports learned from the
training sets, and pools the elements transported to each support (Mialon et al., 2021). The
transport plan :math:`\\mathbf{P}` of a set, an ``(n_i, p)`` matrix whose rows sum to ``1/n_i`` and
columns to ``1/p``, says which elements pool together.

Here the sets are utterances of the Japanese Vowels data (a speaker says "ae"; each utterance is a
sequence of 7 to 29 frames of 12 LPC coefficients). After Nystrom features of the frames, a
reference of 5 supports is fitted by k-means on the training frames. The embedding ignores the
order of the frames, yet the plans show that *consecutive* frames tend to pool together: the
support a frame sends most of its mass to follows its place in the utterance. The entropic
regularisation ``epsilon`` sets how sharp the alignment is; a large ``epsilon`` spreads every
frame over all supports, towards mean pooling.
"""

# %%
# Fit the features and the reference
# -----------------------------------
import matplotlib.pyplot as plt
import numpy as np

from skset import NystromFeatures, OTKEmbedding
from skset.datasets import load_japanese_vowels

X_train, y_train = load_japanese_vowels(subset="train", return_X_y=True)
X_test, y_test = load_japanese_vowels(subset="test", return_X_y=True)
nystrom = NystromFeatures(n_components=64, random_state=0).fit(X_train)
F_train = nystrom.transform(X_train)  # list of (n_i, 64) arrays

otk = OTKEmbedding(n_supports=5, epsilon=0.1, random_state=0).fit(F_train)
otk_smooth = OTKEmbedding(n_supports=5, epsilon=1.0, random_state=0).fit(F_train)

# The supports of a k-means reference come in no particular order. For display, order them by the
# mean relative position (0 = first frame, 1 = last) of the training frames they receive.
plans_train = [P[0] for P in otk.transport_plan(F_train)]
position = sum(np.linspace(0, 1, len(P)) @ P for P in plans_train)
mass = sum(P.sum(axis=0) for P in plans_train)
order = np.argsort(position / mass)
print("mean relative position of each support's frames:", np.round((position / mass)[order], 2))

# two utterances of each of two speakers
speakers = np.unique(y_test)[:2]
picked = [i for s in speakers for i in np.flatnonzero(y_test == s)[:2]]
F_picked = nystrom.transform([X_test[i] for i in picked])

# one (n_references, n_i, p) array per set; here a single reference
plans = [P[0][:, order] for P in otk.transport_plan(F_picked)]
plans_smooth = [P[0][:, order] for P in otk_smooth.transport_plan(F_picked)]
print("plan shape of the first utterance:", plans[0].shape)

# %%
# Plot the plans
# --------------
# Each row of a plan is one frame; its mass (``1/n_i`` in total) is spread over the supports.
# Rows are rescaled to sum to 1 for display, so a dark cell means "this frame goes to this
# support". With ``epsilon=0.1`` (top) the plans are ordered but spread: beginning, middle and
# end of an utterance send most of their mass to different supports (a frame's largest share is
# about a third of its mass, against a fifth if spread evenly), although nothing in the embedding
# knows the order of the frames (``position_sigma`` would add that). With ``epsilon=1`` (bottom)
# each frame is shared almost evenly among the supports.


def as_rows(P):
    return P / P.sum(axis=1, keepdims=True)


fig, axes = plt.subplots(2, len(picked), figsize=(11, 6), sharex=True, constrained_layout=True)
for col, (i, P, Q) in enumerate(zip(picked, plans, plans_smooth)):
    for row, M in enumerate((P, Q)):
        ax = axes[row, col]
        im = ax.imshow(as_rows(M), aspect="auto", cmap="Blues", vmin=0, vmax=1,
                       interpolation="nearest")
        ax.set_xticks(range(otk.n_supports))
        ax.set_yticks(range(0, M.shape[0], 3))
        ax.set_xlabel("support (ordered)")
        if col == 0:
            ax.set_ylabel(f"epsilon={(0.1, 1.0)[row]}\nframe")
        if row == 0:
            ax.set_title(f"speaker {y_test[i]}, {M.shape[0]} frames")
fig.colorbar(im, ax=axes, shrink=0.6, label="share of the frame's mass")
fig.suptitle("Transport plans of four utterances onto the learned 5-support reference")
plt.show()

# %%
# What the supports hold
# ----------------------
# The embedding of a set is ``sqrt(p) P^T psi(x)``: one pooled feature vector per support. The
# number of frames each support receives (the column sums of the plan, times ``n_i``) shows that
# every support gets the same total mass (``1/p``) however long the utterance is: long utterances
# spread more frames over each support.
for i, P in zip(picked, plans):
    print(f"speaker {y_test[i]}: frames per support", np.round(P.sum(0) * P.shape[0], 2))
