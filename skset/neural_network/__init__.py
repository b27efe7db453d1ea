"""Neural estimators on sets, trained end to end with one shared loop.

* :class:`SetTransformerClassifier`, :class:`SetTransformerRegressor`: Set Transformer (and ST++);
* :class:`DeepSetsClassifier`, :class:`DeepSetsRegressor`: Deep Sets (and DS++);
* :class:`OTKClassifier`, :class:`OTKRegressor`: supervised, end-to-end OTK.
"""

from ._otk import OTKClassifier, OTKRegressor
from ._set_networks import (
    DeepSetsClassifier,
    DeepSetsRegressor,
    SetTransformerClassifier,
    SetTransformerRegressor,
)

__all__ = [
    "SetTransformerClassifier",
    "SetTransformerRegressor",
    "DeepSetsClassifier",
    "DeepSetsRegressor",
    "OTKClassifier",
    "OTKRegressor",
]
