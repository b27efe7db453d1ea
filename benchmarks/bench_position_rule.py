"""How ``OTKEmbedding(position_sigma="auto")`` was chosen: for each suite data set and seed, the
proxy's paired t statistics of each candidate width against no positions and against the same
width on shuffled sets, next to the test accuracy of the default pipeline with each width.

The default element map (``NystromFeatures()``, its k-mer width chosen from the labels) feeds one
``OTKEmbedding`` per width (``None``, 0.1, 0.3, 1.0), fitted on the training sets; the proxy is
the one of :mod:`skset.embedding._position_choice` (leave-one-out ridge errors of the training
embeddings, up to 600 sets); ``t_none`` and ``t_shuffled`` are the paired t statistics of its
errors (above 2: the width beats no positions / the shuffled control by more than noise).

    cd benchmarks
    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 python bench_position_rule.py \\
        --datasets PickupGestureWiimoteZ ACSF1 GunPoint ... --json-rows results/position_rule.jsonl

``--bags N``: instead, how often the rule takes positions on ``N`` unordered bags, where the order
of the rows carries nothing: labelled bags of i.i.d. elements whose class moves their mean (40
to 200 sets of 5 to 60 elements, 2 to 8 features, 2 or 3 classes, each draw its own), fed to
``OTKEmbedding(n_supports=8)`` as raw elements scaled like Nystrom features; how often positions
beat no positions (the first test alone) is printed too.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from bench_suite import RowLog, clf, score  # noqa: E402
from suite_data import DATASETS, load  # noqa: E402

from skset import NystromFeatures, OTKEmbedding  # noqa: E402
from skset._label_tasks import _targets, _task  # noqa: E402
from skset._map_selection import sample_sets  # noqa: E402
from skset._stats import paired_t  # noqa: E402
from skset.embedding._position_choice import _proxy_errors  # noqa: E402

WIDTHS = (0.1, 0.3, 1.0)


def bags(n_draws):
    """The rule on ``n_draws`` unordered labelled bags: how often it takes positions, and how
    often positions beat no positions (the first of its two tests)."""
    taken = first_test = 0
    for draw in range(n_draws):
        rng = np.random.default_rng(draw)
        n_sets, d, k = int(rng.integers(40, 201)), int(rng.integers(2, 9)), int(rng.integers(2, 4))
        y = np.arange(n_sets) % k
        shift = rng.normal(size=(k, d))
        X = [0.3 * (rng.normal(size=(int(rng.integers(5, 61)), d)) + 0.7 * shift[c]) for c in y]
        otk = OTKEmbedding(n_supports=8, random_state=draw).fit(X, y)
        taken += otk.position_sigma_ is not None
        first_test += "shuffled" in (otk.position_scores_ or {})
    print(json.dumps({"bags": n_draws, "positions_taken": taken,
                      "positions_beat_none": first_test}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="*", default=DATASETS, choices=DATASETS)
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument("--json-rows", default=None, metavar="PATH")
    ap.add_argument("--bags", type=int, default=None, metavar="N")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    log = RowLog(args.json_rows)
    if args.bags:
        return bags(args.bags)
    for name in args.datasets:
        X_tr, X_te, y_tr, y_te = load(name)
        for seed in args.seeds:
            nys = NystromFeatures(random_state=seed)
            F_tr, F_te = list(nys.fit_transform(X_tr, y_tr)), list(nys.transform(X_te))
            base = OTKEmbedding(position_sigma=None, random_state=seed).fit(F_tr)
            refs = torch.as_tensor(base.references_)
            rng = np.random.RandomState(seed)
            task = _task(np.asarray(y_tr), len(F_tr))
            idx, sub_y = sample_sets(np.arange(len(F_tr)), np.asarray(y_tr), rng)
            sub = [F_tr[i] for i in idx]
            shuffled = [s[rng.permutation(len(s))] for s in sub]
            target = _targets(task, sub_y)

            def errors(sigma, sets, base=base, refs=refs, target=target):
                return _proxy_errors(base._raw_embed(sets, refs, position_sigma=sigma), target,
                                     base.normalize)

            e_none = errors(None, sub)
            row = {"dataset": name, "seed": seed, "window": nys.window_, "accuracy": {}}
            for sigma in (None, *WIDTHS):
                otk = OTKEmbedding(position_sigma=sigma, random_state=seed).fit(F_tr)
                model = clf().fit(otk.transform(F_tr), y_tr)
                row["accuracy"][str(sigma)] = score(model, otk.transform(F_te), y_te, name)
                if sigma is not None:
                    e = errors(sigma, sub)
                    row[f"t_none_{sigma}"] = paired_t(e_none, e, flat=0.0)
                    row[f"t_shuffled_{sigma}"] = paired_t(errors(sigma, shuffled), e, flat=0.0)
            auto = OTKEmbedding(random_state=seed).fit(F_tr, y_tr)
            row["chosen"] = auto.position_sigma_
            print(json.dumps(row), flush=True)
            log.write(**row)


if __name__ == "__main__":
    main()
