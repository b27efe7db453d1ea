"""A series as the set of its time points, each described by fixed dilated kernels.

MiniRocket (Dempster et al., 2021) reads a univariate series through 84 fixed kernels of nine
weights (three of them 2, six -1) at several dilations, and pools each kernel's response by the
proportion of time steps above a few thresholds (PPV). Read as a set method, that is an element
map followed by mean pooling: each time point ``t`` is described by the indicator vector
``1[c_kd(t) > b_kdq]`` of its responses ``c_kd(t)`` (kernel ``k``, dilation ``d``) against
thresholds ``b_kdq`` drawn from the training series' own responses, and the mean of that vector
over the series is the PPV. Rows (``--rows``):

* ``skset``: ``DilatedKernelFeatures`` (defaults, or the JSON ``--params``), ``StandardScaler``,
  ``RidgeClassifierCV``;
* ``minirocket``: aeon's ``MiniRocketClassifier``, on the series as the suite gives them to it
  (``suite_data.series_for_rocket``: variable-length series resampled to the median length);
* probes written here, the element map's dilations spanning the median (``--length-rule
  median``) or the shortest (``min``) training length: ``ppv`` (the indicators mean-pooled,
  the check that the map is right), ``otk_ind`` (the indicators, with fewer thresholds, pooled
  by ``OTKEmbedding`` with defaults, then ``LogisticRegression``), ``nys_ind`` (the same through
  ``NystromFeatures(window=1)`` first), ``otk_conv`` (the responses themselves, ``84 x
  n_dilations`` features per time point, through ``NystromFeatures(window=1)`` and
  ``OTKEmbedding``).

    cd benchmarks
    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python bench_dilated_kernels.py \\
        --datasets ArrowHead GunPoint ItalyPowerDemand PickupGestureWiimoteZ OSULeaf ACSF1 \\
        WatchMagnitude JapaneseVowels BasicMotions SpokenDigits --seeds 0 1 2 \\
        --rows skset minirocket --json-rows results/dilated_kernels.jsonl
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import suite_data  # noqa: E402
import torch  # noqa: E402
from sklearn.linear_model import LogisticRegression, RidgeClassifierCV  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from skset import DilatedKernelFeatures, NystromFeatures, OTKEmbedding  # noqa: E402

#: the 84 kernels: weight 2 at three of nine taps, -1 at the other six (they sum to zero)
KERNELS = np.full((84, 9), -1.0, dtype=np.float32)
for _row, _taps in enumerate(itertools.combinations(range(9), 3)):
    KERNELS[_row, list(_taps)] = 2.0
ROWS = ("skset", "minirocket", "ppv", "otk_ind", "nys_ind", "otk_conv")


def dilations(length, n_max=8):
    """Exponentially spaced dilations whose kernel spans at most the series."""
    top = np.log2(max((length - 1) / 8, 1.0))
    return sorted({int(2 ** e) for e in np.linspace(0, top, n_max)})


def responses(series, dils):
    """``(len, 84 * len(dils))``: each kernel's response at each time point, the series padded
    with zeros (a dilated kernel centred on every step)."""
    x = torch.as_tensor(np.asarray(series, dtype=np.float32).reshape(-1))
    w = torch.as_tensor(KERNELS)
    out = []
    for d in dils:
        padded = torch.nn.functional.pad(x, (4 * d, 4 * d))
        taps = padded.unfold(0, 8 * d + 1, 1)[:, ::d]          # (len, 9)
        out.append(taps @ w.T)
    return torch.cat(out, dim=1)


def thresholds(train, dils, n_quantiles, rng):
    """Per response, ``n_quantiles`` thresholds: quantiles of one random training series'
    responses (a different series for each dilation), at low-discrepancy levels."""
    levels = (np.arange(1, n_quantiles + 1) * 0.6180339887) % 1.0
    cols = []
    for d in dils:
        r = responses(train[rng.randint(len(train))], [d]).numpy()
        cols.append(np.quantile(r, levels, axis=0).T)                 # (84, q)
    return torch.as_tensor(np.concatenate(cols, axis=0), dtype=torch.float32)  # (84 nd, q)


def indicators(series, dils, bias):
    r = responses(series, dils)
    return (r[:, :, None] > bias[None]).reshape(len(r), -1).float()


def run(name, row, seed, n_quantiles, length_rule="median", params=None):
    X_tr, X_te, y_tr, y_te = suite_data.load(name)
    rng = np.random.RandomState(seed)
    dils = dilations(int(getattr(np, length_rule)([len(x) for x in X_tr])))
    t = time.perf_counter()
    if row == "minirocket":  # as the suite runs it (series resampled to one length)
        from aeon.classification.convolution_based import MiniRocketClassifier

        A, B, y_tr, y_te = suite_data.series_for_rocket(name)
        t = time.perf_counter()  # the resampling is data preparation, not MiniRocket's time
        m = MiniRocketClassifier(random_state=seed).fit(A, y_tr)
        return 100 * m.score(B, y_te), time.perf_counter() - t
    if row == "skset":
        model = make_pipeline(DilatedKernelFeatures(random_state=seed, **(params or {})),
                              StandardScaler(),
                              RidgeClassifierCV(alphas=np.logspace(-3, 3, 10))).fit(X_tr, y_tr)
        return 100 * model.score(X_te, y_te), time.perf_counter() - t
    if row == "ppv":
        bias = thresholds(X_tr, dils, n_quantiles, rng)
        F_tr, F_te = (np.stack([indicators(x, dils, bias).mean(0).numpy() for x in X])
                      for X in (X_tr, X_te))
        scaler = StandardScaler().fit(F_tr)
        clf = RidgeClassifierCV(alphas=np.logspace(-3, 3, 10)).fit(scaler.transform(F_tr), y_tr)
        return 100 * clf.score(scaler.transform(F_te), y_te), time.perf_counter() - t
    if row in ("otk_ind", "nys_ind"):
        bias = thresholds(X_tr, dils, 2, rng)
        A, B = ([indicators(x, dils, bias).numpy() for x in X] for X in (X_tr, X_te))
        if row == "nys_ind":
            ny = NystromFeatures(window=1, random_state=seed).fit(A, y_tr)
            A, B = ny.transform(A), ny.transform(B)
    else:
        A, B = ([responses(x, dils).numpy() for x in X] for X in (X_tr, X_te))
        ny = NystromFeatures(window=1, random_state=seed).fit(A, y_tr)
        A, B = ny.transform(A), ny.transform(B)
    otk = OTKEmbedding(random_state=seed).fit(A, y_tr)
    clf = LogisticRegression(max_iter=1000).fit(otk.transform(A), y_tr)
    return 100 * clf.score(otk.transform(B), y_te), time.perf_counter() - t


def proxy(name, seed):
    """What the width rule's proxy (leave-one-out ridge errors of mean-pooled Nystrom features,
    ``skset._map_selection``) says of the indicator elements (2 thresholds) against the k-mers
    ``NystromFeatures`` takes: both scored on the same sampled training sets, the paired t of
    the indicators over the k-mers (positive: the indicators' errors are lower)."""
    import skset._map_selection as ms
    from skset._stats import paired_t

    X_tr, _, y_tr, _ = suite_data.load(name)
    ny = NystromFeatures(random_state=seed).fit(X_tr, y_tr)
    choice = {"standardize": ny.standardize_, "normalize": ny.normalize_,
              "keep_norm": ny.keep_norm_, "bandwidth": ny.relative_bandwidth_}
    rng = np.random.RandomState(seed)
    sub, sub_y = ms.sample_sets(list(X_tr), y_tr, rng)
    target = ms._targets("classification", sub_y)
    dils = dilations(int(np.median([len(x) for x in X_tr])))
    bias = thresholds(X_tr, dils, 2, rng)
    ind = [indicators(x, dils, bias).numpy().astype(np.float64) for x in sub]
    common = dict(n_components=ny.n_components, eigenvalue_floor=ny.eigenvalue_floor, rng=rng,
                  dtype=torch.float32)
    w, d = ny.window_, ny.dilation_
    per = ms.kmers_per_set(len(sub), w, 1, "level_shape", ms.WINDOW_MAX_VALUES)
    kmers = ms.kmer_errors([ms._sampled_rows(sub, rng, per, w, "level_shape", d)], choice,
                           target, **common)[0]
    per = ms.kmers_per_set(len(sub), 1, ind[0].shape[1], "plain", ms.WINDOW_MAX_VALUES)
    kern = ms.kmer_errors([ms._sampled_rows(ind, rng, per)], choice, target, **common)[0]
    return f"{w}:{d}", kmers.mean(), kern.mean(), paired_t(kmers, kern, flat=0.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="*", default=["ACSF1", "WatchMagnitude", "ArrowHead"])
    ap.add_argument("--rows", nargs="*", default=["skset", "minirocket"], choices=ROWS)
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument("--quantiles", type=int, default=12,
                    help="thresholds per response for the ppv row")
    ap.add_argument("--length-rule", choices=["median", "min"], default="median",
                    help="the training length the probe rows' dilations span")
    ap.add_argument("--json-rows", default=None)
    ap.add_argument("--params", default="{}",
                    help="JSON parameters of DilatedKernelFeatures for the skset row")
    ap.add_argument("--proxy", action="store_true",
                    help="print the width rule's proxy for the indicators against the k-mers taken")
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    params = json.loads(args.params)
    warnings.filterwarnings("ignore")
    if args.proxy:
        print("| data set | seed | k-mers taken | their error | indicators' error | paired t |")
        print("|---|---|---|---|---|---|")
        for name in args.datasets:
            for seed in args.seeds:
                taken, a, b, t = proxy(name, seed)
                print(f"| {name} | {seed} | {taken} | {a:.3f} | {b:.3f} | {t:.2f} |", flush=True)
        return
    print("| data set | row | accuracy (seeds) | seconds a fit |")
    print("|---|---|---|---|")
    for name in args.datasets:
        for row in args.rows:
            res = [run(name, row, s, args.quantiles, args.length_rule, params)
                   for s in args.seeds]
            if args.json_rows:
                with open(args.json_rows, "a") as f:
                    for s, (score, sec) in zip(args.seeds, res):
                        f.write(json.dumps({"dataset": name, "row": row, "seed": s,
                                            "quantiles": args.quantiles,
                                            "length_rule": args.length_rule,
                                            "params": params, "score": score,
                                            "time_s": sec}) + "\n")
            scores = [r[0] for r in res]
            print(f"| {name} | {row} | {np.mean(scores):.1f} "
                  f"({', '.join(f'{v:.1f}' for v in scores)}) | "
                  f"{np.mean([r[1] for r in res]):.1f} |", flush=True)


if __name__ == "__main__":
    main()
