"""The networks' prediction under skset's thread policy: ``predict_proba`` of a Set Transformer
and of Deep Sets, inherited from a mixin, ran outside the policy before 2026-11-29 (on torch's
own count whatever the size) and runs inside it since (one thread below the size rule's
threshold, the usable cores above it). Many calls on small batches (64 sets of 5-30 elements of
8 features, the serving case) and a few on a large one (2,000 sets of 20-200 elements of 16
features). Prints nothing: timed as a whole process, against another checkout of skset
(``PYTHONPATH``), with the library's ``farm-bench``, on the machine's default threads (no
``OMP_NUM_THREADS``)::

    farm-bench -n 5 --timeout 800 \\
        --vs "env PYTHONPATH=<other checkout> python benchmarks/bench_predict_scope.py" \\
        -- env PYTHONPATH=. python benchmarks/bench_predict_scope.py

Results: ``results/threads_scope.md``.
"""

import os
import warnings

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

from skset import DeepSetsClassifier, SetTransformerClassifier  # noqa: E402


def main() -> None:
    warnings.simplefilter("ignore")  # one epoch of training: not converged, on purpose
    rng = np.random.default_rng(0)
    small = [[rng.normal(size=(int(n), 8)).astype(np.float32) for n in rng.integers(5, 30, 64)]
             for _ in range(10)]
    large = [rng.normal(size=(int(n), 16)).astype(np.float32) for n in rng.integers(20, 200, 2000)]
    for width, X in ((8, small[0]), (16, large[:200])):
        y = np.arange(len(X)) % 2
        for cls in (SetTransformerClassifier, DeepSetsClassifier):
            model = cls(max_iter=1, random_state=0, device="cpu").fit(X, y)
            if width == 8:
                for _ in range(20):
                    for batch in small:
                        model.predict_proba(batch)
            else:
                for _ in range(2):
                    model.predict_proba(large)


if __name__ == "__main__":
    main()
