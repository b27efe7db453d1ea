"""Data sets: the bundled Japanese Vowels data, a ``.ts`` reader and synthetic set generators."""

from ._clustering import load_digits_split, make_circles_instances, sample_clustering_instances
from ._sequences import make_motif_order
from ._synthetic import (
    make_gaussian_mixture_sets,
    make_max_regression,
    make_normal_var,
    make_unique_count,
)
from ._ts import load_japanese_vowels, read_ts

__all__ = [
    "load_digits_split",
    "load_japanese_vowels",
    "make_circles_instances",
    "make_gaussian_mixture_sets",
    "make_max_regression",
    "make_motif_order",
    "make_normal_var",
    "make_unique_count",
    "read_ts",
    "sample_clustering_instances",
]
