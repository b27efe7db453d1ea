"""The k-mer width and dilation the set networks choose on suite data sets, without training.

``python benchmarks/bench_network_widths.py GeneFamilies DigitPoints ...`` prints, for each data
set, framing (``set``, and ``seq`` where the suite frames it as k-mers) and seed 0-2, the
``(window, dilation)`` that ``DeepSetsClassifier`` and ``SetTransformerClassifier`` with defaults
take in ``fit`` (the fit is stopped once the width is chosen). Run it on two trees
(``PYTHONPATH``) to see which fits a change of the width rule moves. The data come from
``suite_data.py`` (``SKSET_SUITE_DATA`` for a dump).
"""

import os
import sys
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from suite_data import KINDS, load  # noqa: E402

import skset.neural_network._set_networks as set_networks  # noqa: E402
from skset import DeepSetsClassifier, SetTransformerClassifier  # noqa: E402
from skset._sets import kmer_windows  # noqa: E402


class _Chosen(Exception):
    """Carries the width out of ``fit``."""


def main(names):
    warnings.filterwarnings("ignore")
    choose = set_networks.choose_kmers

    def stop(*args, **kwargs):
        raise _Chosen(choose(*args, **kwargs))

    set_networks.choose_kmers = stop
    for name in names:
        X_tr, _, y_tr, _ = load(name)
        w = KINDS[name]["window"]
        for framing in (["set", "seq"] if w else ["set"]):
            X = kmer_windows(X_tr, w) if framing == "seq" else X_tr
            for seed in (0, 1, 2):
                for cls in (DeepSetsClassifier, SetTransformerClassifier):
                    try:
                        cls(random_state=seed).fit(X, y_tr)
                    except _Chosen as chosen:
                        print(name, framing, seed, cls.__name__, chosen.args[0], flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
