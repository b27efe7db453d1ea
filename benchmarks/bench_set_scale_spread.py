"""The spread that switches the set networks' ``standardize="auto"`` to reading each set by its
own scale (``skset/neural_network/_set_scale.py``: the 90th over the 10th percentile of the
training sets' deviations, threshold ``SET_SCALE_SPREAD``), on the training sets of every
real-data suite row in both framings, the series sets kept out of the suite (with
``SKSET_HELDOUT_DATA``) and the regression rows of ``bench_regression.py``:

    cd benchmarks
    SKSET_HELDOUT_DATA=<unzipped wheels> python bench_set_scale_spread.py

Results: ``results/suite.md``, "Series never used to choose a default", and
``results/regression.md``, "Case counts read set by set".
"""

import os
import warnings

import bench_regression
import suite_data

from skset._sets import kmer_windows
from skset.neural_network._set_scale import SET_SCALE_SPREAD, scale_spread


def main():
    warnings.simplefilter("ignore")
    names = suite_data.DATASETS + (list(suite_data.HELD_OUT) if os.environ.get("SKSET_HELDOUT_DATA")
                                   else [])
    print(f"threshold {SET_SCALE_SPREAD:g}")
    for name in names:
        X = suite_data.load(name)[0]
        w = suite_data.KINDS[name]["window"]
        row = f"{name:24s} set {scale_spread(X):10.3g}"
        if w:
            row += f"  seq ({w}-mers) {scale_spread(kmer_windows(X, w)):10.3g}"
        print(row)
    for name in bench_regression.ROWS:
        X = (bench_regression._series_row(name) if name in bench_regression.SERIES_ROWS
             else bench_regression.row_data(name, 0, True))[0]
        print(f"{name:24s} regression {scale_spread(X):10.3g}")


if __name__ == "__main__":
    main()
