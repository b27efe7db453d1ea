"""
From a long table of cells to answers per sample and per cell
=============================================================

Cytometry and single-cell data come as one long table: one row per cell, a column saying which
sample (patient, blood draw) the cell comes from, and one column per marker. A sample is a *set* of
cells. :func:`skset.sets_from_frame` cuts the table into sets, a set-level pipeline classifies the
samples, and :func:`skset.frame_from_sets` puts what the pipeline says about each cell back next to
the cell's row, where it can be inspected with the usual data-frame tools.

The table here is synthetic but shaped like real data: 40 blood samples of 300 to 900 cells,
seven markers on an arcsinh scale, six cell populations whose proportions vary from sample to
sample, and a per-sample shift (a batch effect). Half the samples come from patients, who carry
more *activated* CD8 T cells (CD8+ HLA-DR+): a few percent of the cells, which the average over a
sample barely shows.
"""

# %%
# A long table: one row per cell
# ------------------------------
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.pipeline import Pipeline

from skset import NystromFeatures, OTKEmbedding, frame_from_sets, sets_from_frame

markers = ["CD3", "CD4", "CD8", "CD19", "CD14", "CD56", "HLA-DR"]
populations = {  # mean marker levels (arcsinh scale) of each population
    "CD4 T":         [4.0, 4.0, 0.3, 0.2, 0.3, 0.3, 0.5],
    "CD8 T":         [4.0, 0.3, 4.0, 0.2, 0.3, 0.5, 0.5],
    "activated CD8": [4.0, 0.3, 4.0, 0.2, 0.3, 0.5, 3.5],
    "B":             [0.3, 0.3, 0.3, 4.0, 0.3, 0.3, 3.5],
    "monocyte":      [0.3, 2.0, 0.3, 0.3, 4.0, 0.3, 3.5],
    "NK":            [0.5, 0.3, 1.5, 0.2, 0.3, 4.0, 0.5],
}
names, means = list(populations), np.array(list(populations.values()))
rng = np.random.default_rng(0)

tables, conditions = [], {}
for s in range(40):
    sample, patient = f"S{s:02d}", s % 2 == 1
    share = rng.dirichlet(40 * np.array([0.35, 0.2, 0.005, 0.12, 0.2, 0.125]))
    share[2] += rng.uniform(0.04, 0.08) if patient else 0.0  # more activated CD8 T in patients
    n_cells = rng.integers(300, 900)
    kind = rng.choice(len(names), size=n_cells, p=share / share.sum())
    values = means[kind] + rng.normal(0, 0.5, (n_cells, len(markers))) + rng.normal(0, 0.2, 7)
    tables.append(pd.DataFrame(values, columns=markers).assign(sample=sample,
                                                               population=np.array(names)[kind]))
    conditions[sample] = "patient" if patient else "healthy"
cells = pd.concat(tables, ignore_index=True)[["sample", "population", *markers]]
cells.index = "cell" + cells.index.astype(str)
labels = pd.Series(conditions, name="condition")  # one row per sample
print(cells.head())
print(f"{len(cells)} cells in {cells['sample'].nunique()} samples")

# %%
# Cells to sets, samples to labels
# --------------------------------
# ``population`` is text (and in real data unknown), so the features are named. ``ids`` says
# which sample each set is (sets come in order of first appearance); the labels are looked up with
# it.
sets, ids = sets_from_frame(cells, by="sample", columns=markers)
y = labels.loc[ids].to_numpy()
print(len(sets), "sets;", "first:", ids[0], sets[0].shape, "label:", y[0])

# %%
# Classify the samples
# --------------------
# Nystrom features of each cell, an optimal transport embedding of each sample, and a linear
# model; five-fold cross-validation over the 40 samples.
pipe = Pipeline([
    ("nystrom", NystromFeatures(n_components=32, random_state=0)),
    ("otk", OTKEmbedding(n_supports=10, random_state=0)),
    ("clf", LogisticRegression(max_iter=2000)),
])
cv = StratifiedKFold(5, shuffle=True, random_state=0)
accuracy = cross_val_score(pipe, sets, y, cv=cv)
print(f"cross-validated accuracy: {accuracy.mean():.2f} (+- {accuracy.std():.2f})")

# %%
# Per-cell outputs back next to the cells
# ---------------------------------------
# Fit on every sample, then ask the pipeline about each cell: its Nystrom features, and the
# support of the OTK reference its transport plan sends most of its mass to (a data-driven
# grouping of the cells). ``frame=cells`` adds them as columns of the original table, row by
# row.
pipe.fit(sets, y)
features = pipe.named_steps["nystrom"].transform(sets)       # list of (n_i, 32) arrays
plans = pipe.named_steps["otk"].transport_plan(features)      # (1, n_i, 10) per sample
support = [p[0].argmax(axis=1) for p in plans]                # one integer per cell

cells_out = frame_from_sets(features, ids, by="sample", columns="nys", frame=cells)
cells_out = frame_from_sets(support, ids, by="sample", columns="support", frame=cells_out)
print(cells_out[["sample", "population", "CD8", "HLA-DR", "nys0", "nys1", "support"]].head())

# The supports are groups of cells learned without any label; with the table, the usual tools say
# what they are: a cross-tabulation against the populations (known here because the data are
# synthetic) shows that most supports hold one population.
print(pd.crosstab(cells_out["population"], cells_out["support"]))

# %%
# The same from an AnnData object
# -------------------------------
# Single-cell tools keep the matrix in ``adata.X`` (cells x markers or genes) and the per-cell
# annotations, the sample among them, in ``adata.obs``. A frame of both gives the same sets.
try:
    import anndata
except ImportError:  # anndata is not a dependency of skset
    anndata = None
if anndata is not None:
    adata = anndata.AnnData(X=cells[markers].to_numpy(), obs=cells[["sample"]].astype("category"))
    adata.var_names = markers
    df = adata.to_df()
    df["sample"] = adata.obs["sample"].to_numpy()
    sets_ad, ids_ad = sets_from_frame(df, by="sample")
    assert ids_ad == ids and all(np.array_equal(a, b) for a, b in zip(sets_ad, sets))
    print("AnnData:", adata.n_obs, "cells ->", len(sets_ad), "sets, the same as from the table")

# %%
# Look at the cells
# -----------------
# Two samples, one healthy and one from a patient, drawn on two of their markers, each cell
# coloured by the support its transport plan sends it to. The patient's cells in the upper right
# are the activated CD8 T cells (CD8+ HLA-DR+).
fig, axes = plt.subplots(1, 2, figsize=(9, 4), sharex=True, sharey=True, constrained_layout=True)
for ax, sample in zip(axes, ["S00", "S01"]):
    one = cells_out[cells_out["sample"] == sample]
    ax.scatter(one["CD8"], one["HLA-DR"], c=one["support"], cmap="tab10", vmin=0, vmax=9, s=6)
    ax.set_title(f"{sample} ({labels[sample]}), {len(one)} cells")
    ax.set_xlabel("CD8")
axes[0].set_ylabel("HLA-DR")
plt.show()
