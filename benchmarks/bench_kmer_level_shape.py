"""Issue 23: k-mers as level + shape, and a data-driven choice between them and plain k-mers.

A k-mer of a smooth series is mostly its level: its k values are strongly correlated, so after
per-feature standardisation the Euclidean distance (and the Gaussian kernel of
``NystromFeatures``) between two k-mers is dominated by the difference of their means, and shapes
that differ only in where they sit (OSULeaf outlines, ArrowHead profiles) look alike. The
*level + shape* form of a k-mer ``w`` (``k`` steps x ``c`` channels) is ``w - mean_t(w)`` (the
shape, ``k * c`` values) followed by ``mean_t(w)`` (the level, ``c`` values); it is a linear,
information-preserving re-coding (the raw k-mer is recovered exactly), and after per-feature
standardisation the level weighs as one coordinate per channel rather than ``k``. MiniRocket's
kernels (weights summing to zero, plus a bias) make the same split.

Rows, per data set of the suite's ``seq`` framing (``KINDS[name]["window"]``-mers) and seed:

* ``plain``: ``NystromFeatures(window=k)`` -> ``OTKEmbedding()`` -> ``LogisticRegression``, every
  default: the suite's ``otk`` row;
* ``level_shape``: the same pipeline on the level + shape k-mers (built here, ``window=1``);
* ``rule``: ``level_shape`` unless the map-choice proxy of ``skset._map_selection`` (leave-one-out
  ridge error of mean-pooled Nystrom features: 64 random anchors, at most 64 elements of at most
  600 training sets, the automatic map) says plain k-mers are better by more than noise (paired t
  over the training sets above ``MIN_T`` = 2, the rule's existing guard): the incumbent is level +
  shape, the challenger plain; reads only the training sets and labels;
* ``level_shape_dil`` (``--dilations``): level + shape k-mers at dilations 1, 2, 4, 8 (elements
  ``x[t], x[t+d], ..., x[t+(k-1)d]``), one ``NystromFeatures`` + ``OTKEmbedding`` per dilation, the
  embeddings concatenated (series shorter than a dilated k-mer are padded with their last value);
  with its proxy t against ``level_shape`` (mean-pooled features of every dilation concatenated).

    cd benchmarks
    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python bench_kmer_level_shape.py --seeds 0 1 2 \
        --dilations --out results/kmer_level_shape.jsonl

``--table FILE.jsonl`` prints the markdown table of a finished run.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from suite_data import KINDS, load  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402
from skset._map_selection import MIN_T, loo_ridge_errors  # noqa: E402

SETS = ["ArrowHead", "OSULeaf", "ItalyPowerDemand", "GunPoint", "PickupGestureWiimoteZ", "ACSF1",
        "WatchMagnitude", "GeneFamilies"]
DILATIONS = (1, 2, 4, 8)


def kmers(X, k, dilation=1, level_shape=True):
    """The k-mers of every series (``(n_i - (k-1)d, k*c)``), as level + shape or plain."""
    out = []
    for x in X:
        x = np.asarray(x, dtype=np.float64)
        n = len(x) - (k - 1) * dilation
        if n < 1:  # too short for one dilated k-mer: pad with the last value
            x = np.concatenate([x, np.repeat(x[-1:], 1 - n, 0)])
            n = 1
        w = x[np.arange(n)[:, None] + dilation * np.arange(k)[None]]  # (n, k, c)
        if level_shape:
            level = w.mean(1)
            out.append(np.concatenate([(w - level[:, None]).reshape(n, -1), level], 1))
        else:
            out.append(w.reshape(n, -1))
    return out


def pipeline_score(A, B, y_tr, y_te, seed, window=1):
    nys = NystromFeatures(window=window, random_state=seed)
    F_tr = nys.fit_transform(A, y_tr)
    F_te = nys.transform(B)
    otk = OTKEmbedding(random_state=seed)
    return otk.fit_transform(F_tr), otk.transform(F_te)


def fit_score(E_tr, E_te, y_tr, y_te):
    clf = LogisticRegression(max_iter=1000).fit(E_tr, y_tr)
    return float(np.mean(clf.predict(E_te) == y_te))


def pooled(A, y, seed):
    """Mean-pooled Nystrom features of a sample (the proxy's view), columns standardised."""
    rng = np.random.RandomState(seed)
    if len(A) > 600:
        pick = np.sort(rng.choice(len(A), 600, replace=False))
        A, y = [A[i] for i in pick], np.asarray(y)[pick]
    A = [a if len(a) <= 64 else a[rng.choice(len(a), 64, replace=False)] for a in A]
    F = NystromFeatures(n_components=64, anchors="random", random_state=seed).fit_transform(A, y)
    P = np.stack([f.mean(0) for f in F])
    sd = P.std(0)
    return P / np.where(sd > 1e-12, sd, 1.0), y


def loo(P, y):
    classes, codes = np.unique(y, return_inverse=True)
    T = np.eye(len(classes))[codes]
    return loo_ridge_errors(P, T[:, 1:] if len(classes) == 2 else T)


def paired_t(incumbent, challenger):
    """t of ``incumbent - challenger`` errors (> 0: the challenger is better)."""
    d = incumbent - challenger
    return float(d.mean() / (d.std(ddof=1) / np.sqrt(len(d)) + 1e-300))


def run(name, seed, dilations):
    X_tr, X_te, y_tr, y_te = load(name)
    y_tr, y_te = np.asarray(y_tr), np.asarray(y_te)
    k = KINDS[name]["window"]
    out = {"data": name, "seed": seed, "k": k}
    t = time.perf_counter()
    out["plain"] = fit_score(*pipeline_score(X_tr, X_te, y_tr, y_te, seed, window=k), y_tr, y_te)
    out["t_plain"] = time.perf_counter() - t
    t = time.perf_counter()
    A, B = kmers(X_tr, k), kmers(X_te, k)
    E = pipeline_score(A, B, y_tr, y_te, seed)
    out["level_shape"] = fit_score(*E, y_tr, y_te)
    out["t_level_shape"] = time.perf_counter() - t
    # the rule: level + shape unless plain k-mers beat it by more than noise on the proxy
    t = time.perf_counter()
    P_ls, ys = pooled(A, y_tr, seed)
    P_pl, _ = pooled(kmers(X_tr, k, level_shape=False), y_tr, seed)
    e_ls = loo(P_ls, ys)
    out["proxy_t_plain"] = paired_t(e_ls, loo(P_pl, ys))
    out["t_proxy"] = time.perf_counter() - t
    out["rule_choice"] = "plain" if out["proxy_t_plain"] > MIN_T else "level_shape"
    out["rule"] = out[out["rule_choice"]]
    if dilations:
        t = time.perf_counter()
        parts_tr, parts_te, P = [E[0]], [E[1]], [P_ls]
        for d in DILATIONS[1:]:
            Ad, Bd = kmers(X_tr, k, d), kmers(X_te, k, d)
            Ed = pipeline_score(Ad, Bd, y_tr, y_te, seed)
            parts_tr.append(Ed[0])
            parts_te.append(Ed[1])
            P.append(pooled(Ad, y_tr, seed)[0])
        out["level_shape_dil"] = fit_score(np.hstack(parts_tr), np.hstack(parts_te), y_tr, y_te)
        out["t_level_shape_dil"] = out["t_level_shape"] + time.perf_counter() - t
        out["proxy_t_dil"] = paired_t(e_ls, loo(np.hstack(P), ys))
    return out


def table(path):
    rows = [json.loads(line) for line in open(path)]
    by = defaultdict(list)
    for r in rows:
        by[r["data"]].append(r)
    cols = ["plain", "level_shape", "rule", "level_shape_dil"]
    print("| data set (k) | seeds | " + " | ".join(cols) + " | rule chose | proxy t (plain; dil) |"
          " fit s (plain / l+s / proxy / dil) |")
    print("|---" * (len(cols) + 5) + "|")
    for name, rs in by.items():
        def cell(c, rs=rs):
            v = [100 * r[c] for r in rs if c in r]
            return f"{np.mean(v):.1f} ± {np.std(v):.1f}" if v else ""

        def sec(c, rs=rs):
            v = [r[c] for r in rs if c in r]
            return f"{np.mean(v):.1f}" if v else "-"
        chose = ", ".join(r["rule_choice"] for r in rs)
        tt = ", ".join(f"{r['proxy_t_plain']:.1f}" for r in rs)
        td = ", ".join(f"{r['proxy_t_dil']:.1f}" for r in rs if "proxy_t_dil" in r)
        print(f"| {name} ({rs[0]['k']}) | {len(rs)} | " + " | ".join(cell(c) for c in cols)
              + f" | {chose} | {tt}; {td} | {sec('t_plain')} / {sec('t_level_shape')} / "
              f"{sec('t_proxy')} / {sec('t_level_shape_dil')} |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=SETS)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--dilations", action="store_true")
    ap.add_argument("--out", default=None, help="append one JSON line per data set and seed")
    ap.add_argument("--table", default=None)
    a = ap.parse_args()
    if a.table:
        table(a.table)
    else:
        for name in a.datasets:
            for seed in a.seeds:
                r = run(name, seed, a.dilations)
                print(json.dumps(r), flush=True)
                if a.out:
                    with open(a.out, "a") as f:
                        f.write(json.dumps(r) + "\n")
