"""Data sets: the bundled Japanese Vowels data, a ``.ts`` reader and synthetic set generators."""

from ._clustering import load_digits_split, make_circles_instances, sample_clustering_instances
from ._ts import load_japanese_vowels, read_ts

__all__ = [
    "load_digits_split",
    "load_japanese_vowels",
    "make_circles_instances",
    "read_ts",
    "sample_clustering_instances",
]
