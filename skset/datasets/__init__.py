"""Data sets: the bundled Japanese Vowels data, a ``.ts`` reader and synthetic set generators."""

from ._sequences import make_motif_order
from ._ts import load_japanese_vowels, read_ts

__all__ = ["load_japanese_vowels", "make_motif_order", "read_ts"]
