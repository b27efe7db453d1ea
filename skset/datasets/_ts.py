"""Reader for the UEA/UCR ``.ts`` time-series text format, and the bundled Japanese Vowels data."""

from __future__ import annotations

import os
from importlib import resources

import numpy as np

__all__ = ["read_ts", "load_japanese_vowels"]


def read_ts(path: str | os.PathLike) -> tuple[list[np.ndarray], np.ndarray]:
    """Read a multivariate ``.ts`` file into a list of ``(length, n_dims)`` arrays and labels.

    Lines starting with ``#`` are comments, ``@`` lines the header; after ``@data`` each line is one
    case: the dimensions separated by ``:``, the values of one dimension by ``,``, the class label
    last. Each series becomes one set whose elements are the time steps (in order). A ``?`` (the
    format's missing value) is refused with its line number; values written as ``NaN`` or ``inf``
    are returned as read, and the estimators refuse them by set.

    Returns
    -------
    X : list of ndarray of shape (length_i, n_dims)
    y : ndarray of str, shape (n_cases,), or None
        None where the header says ``@classLabel false``.
    """
    if not isinstance(path, (str, os.PathLike)):  # an int is a file descriptor to open()
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}.")
    try:
        return _read_ts(path)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{os.fspath(path)}: not a text file in UTF-8 ({exc.reason} at byte "
                         f"{exc.start}).") from None


def _read_ts(path):
    X, y = [], []
    in_data = False
    has_labels, declared = True, None
    with open(path, encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            low = line.lower()
            if not in_data:
                if low.startswith("@classlabel"):
                    words = low.split()
                    if len(words) < 2 or words[1] not in ("true", "false"):
                        raise ValueError(f"{path}:{lineno}: @classLabel needs true or false "
                                         f"(then the labels); got {line!r}")
                    has_labels = words[1] == "true"
                    declared = set(line.split()[2:]) if has_labels and len(words) > 2 else None
                elif low.startswith("@data"):
                    in_data = True
                continue
            parts = line.split(":")
            if has_labels:
                label = parts[-1].strip()
                if len(parts) < 2:
                    raise ValueError(f"{path}:{lineno}: a case needs its label after a ':' "
                                     "(@classLabel true)")
                if declared is not None and label not in declared:
                    raise ValueError(f"{path}:{lineno}: label {label!r} is not one of those "
                                     f"@classLabel declares ({' '.join(sorted(declared))})")
                y.append(label)
                parts = parts[:-1]
            try:
                dims = [np.array([float(v) for v in p.split(",")]) for p in parts]
            except ValueError as exc:
                raise ValueError(f"{path}:{lineno}: cannot parse values ({exc})") from None
            lengths = {len(d) for d in dims}
            if len(lengths) != 1:
                raise ValueError(f"{path}:{lineno}: dimensions of one case differ in length "
                                 f"({sorted(lengths)})")
            if X and len(dims) != X[0].shape[1]:
                raise ValueError(f"{path}:{lineno}: {len(dims)} dimension(s), but the first case "
                                 f"has {X[0].shape[1]}")
            X.append(np.stack(dims, axis=1))
    if not in_data:
        raise ValueError(f"{path}: no @data section found")
    return X, np.array(y, dtype=str) if has_labels else None


def load_japanese_vowels(*, subset: str = "train", return_X_y: bool = False):
    """Load the Japanese Vowels speaker-recognition data (bundled with skset).

    9 male speakers (labels ``1`` .. ``9``) saying the vowel pair /ae/; each utterance is a
    sequence of 7 to 29 frames of 12 LPC cepstrum coefficients, i.e. a set of ``(n_i, 12)``
    elements in time order. 270 training and 370 test utterances (the official UCI split, 30
    training utterances per speaker).

    Parameters
    ----------
    subset : {"train", "test", "all"}, default="train"
        Which utterances: the official training set (270), the test set (370), or both (640,
        training ones first). As in scikit-learn's ``fetch_20newsgroups``, the official split is
        two calls, one per subset.
    return_X_y : bool, default=False
        Return ``(X, y)`` instead of a :class:`~sklearn.utils.Bunch`.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With ``data`` (list of float64 arrays of shape ``(n_i, 12)``, one per utterance),
        ``target`` (int64 array of speaker ids 1..9), ``feature_names`` (``"lpc_1"`` ..
        ``"lpc_12"``) and ``DESCR``.
    (X, y) : tuple
        With ``return_X_y=True``: the list of sets and the int64 labels.

    References
    ----------
    M. Kudo, J. Toyama, M. Shimbo. Multidimensional Curve Classification Using Passing-Through
    Regions. Pattern Recognition Letters 20(11-13):1103-1111, 1999. Data: UCI Machine Learning
    Repository, in the UEA/UCR ``.ts`` format.

    Examples
    --------
    >>> from skset.datasets import load_japanese_vowels
    >>> X_train, y_train = load_japanese_vowels(subset="train", return_X_y=True)
    >>> X_test, y_test = load_japanese_vowels(subset="test", return_X_y=True)
    >>> len(X_train), len(X_test), X_train[0].shape[1], y_train.dtype, sorted(set(y_train.tolist()))
    (270, 370, 12, dtype('int64'), [1, 2, 3, 4, 5, 6, 7, 8, 9])
    """
    from sklearn.utils import Bunch

    if subset not in ("train", "test", "all"):
        raise ValueError(f"subset must be 'train', 'test' or 'all', got {subset!r}.")
    base = resources.files("skset.datasets") / "data"
    X, y = [], []
    for part in (["TRAIN", "TEST"] if subset == "all" else [subset.upper()]):
        with resources.as_file(base / f"JapaneseVowels_{part}.ts") as p:
            X_part, y_part = read_ts(p)
        X += X_part
        y.append(y_part.astype(np.int64))
    y = np.concatenate(y)
    if return_X_y:
        return X, y
    descr = (base / "README.md").read_text(encoding="utf-8")
    return Bunch(data=X, target=y, feature_names=[f"lpc_{i}" for i in range(1, 13)], DESCR=descr)
