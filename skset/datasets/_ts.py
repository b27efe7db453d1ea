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
    last. Each series becomes one set whose elements are the time steps (in order).

    Returns
    -------
    X : list of ndarray of shape (length_i, n_dims)
    y : ndarray of str, shape (n_cases,)
    """
    X, y = [], []
    in_data = False
    has_labels = True
    with open(path, encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            low = line.lower()
            if not in_data:
                if low.startswith("@classlabel"):
                    has_labels = low.split()[1] == "true"
                elif low.startswith("@data"):
                    in_data = True
                continue
            parts = line.split(":")
            if has_labels:
                y.append(parts[-1].strip())
                parts = parts[:-1]
            try:
                dims = [np.array([float(v) for v in p.split(",")]) for p in parts]
            except ValueError as exc:
                raise ValueError(f"{path}:{lineno}: cannot parse values ({exc})") from None
            lengths = {len(d) for d in dims}
            if len(lengths) != 1:
                raise ValueError(f"{path}:{lineno}: dimensions of one case differ in length "
                                 f"({sorted(lengths)})")
            X.append(np.stack(dims, axis=1))
    if not in_data:
        raise ValueError(f"{path}: no @data section found")
    return X, np.array(y)


def load_japanese_vowels(*, return_X_y: bool = False):
    """Load the Japanese Vowels speaker-recognition data (bundled with skset).

    9 male speakers (classes ``"1"`` .. ``"9"``) saying the vowel pair /ae/; each utterance is a
    sequence of 7 to 29 frames of 12 LPC cepstrum coefficients, i.e. a set of ``(n_i, 12)``
    elements in time order. 270 training and 370 test utterances (the UCI split).

    Parameters
    ----------
    return_X_y : bool
        Return ``(X_train, X_test, y_train, y_test)`` instead of a dict.

    Returns
    -------
    dict with keys ``X_train, X_test, y_train, y_test, DESCR`` or the tuple above. ``X_*`` are lists
    of float64 arrays; ``y_*`` integer arrays of speaker ids 1..9.

    References
    ----------
    M. Kudo, J. Toyama, M. Shimbo. Multidimensional Curve Classification Using Passing-Through
    Regions. Pattern Recognition Letters 20(11-13):1103-1111, 1999. Data: UCI Machine Learning
    Repository, in the UEA/UCR ``.ts`` format.

    Examples
    --------
    >>> from skset.datasets import load_japanese_vowels
    >>> X_train, X_test, y_train, y_test = load_japanese_vowels(return_X_y=True)
    >>> len(X_train), X_train[0].shape[1], len(set(y_train))
    (270, 12, 9)
    """
    base = resources.files("skset.datasets") / "data"
    with resources.as_file(base / "JapaneseVowels_TRAIN.ts") as p:
        X_train, y_train = read_ts(p)
    with resources.as_file(base / "JapaneseVowels_TEST.ts") as p:
        X_test, y_test = read_ts(p)
    y_train, y_test = y_train.astype(int), y_test.astype(int)
    if return_X_y:
        return X_train, X_test, y_train, y_test
    descr = (base / "README.md").read_text(encoding="utf-8")
    return {"X_train": X_train, "X_test": X_test, "y_train": y_train, "y_test": y_test,
            "DESCR": descr}
