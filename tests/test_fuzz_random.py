"""The fuzz tests once more, on fresh random examples: a randomised profile beside the fixed one.

The fuzz files (``tests/test_fuzz*.py``) run derandomised: the same examples on every run, so the
suite is reproducible. Random draws reach cases the fixed ones miss (the long randomised profile,
``SKSET_FUZZ_EXAMPLES=6000 SKSET_FUZZ_RANDOM=1``, found a defect that the fixed examples did not),
so the suite also runs every fuzz test on new random examples: ``SKSET_FUZZ_RANDOM_EXAMPLES``
(default 300) shared among the tests in proportion to their fixed budgets (at least 3 each), drawn
from the seed ``SKSET_FUZZ_SEED`` (drawn afresh and printed when it is not set).

A failure names the seed: ``SKSET_FUZZ_SEED=<seed> pytest tests/test_fuzz_random.py -k <test>``
draws the same examples again (hypothesis then shrinks the failing one and prints it).
"""

import importlib
import math
import os
import random
import warnings

import pytest
from hypothesis import settings

MODULES = ["test_fuzz", "test_fuzz_engine", "test_fuzz_frames", "test_fuzz_properties"]
SEED = int(os.environ.get("SKSET_FUZZ_SEED") or random.SystemRandom().randrange(2**32))
TOTAL = int(os.environ.get("SKSET_FUZZ_RANDOM_EXAMPLES", 300))


def _fuzz_tests() -> list[tuple[str, str]]:
    """``(module, test)`` of every hypothesis test of the fuzz files."""
    out = []
    for name in MODULES:
        module = importlib.import_module(name)
        out += [(name, t) for t, fn in vars(module).items()
                if t.startswith("test_") and hasattr(fn, "hypothesis")]
    return out


TESTS = _fuzz_tests()
# each test's fixed budget (read once, before any test's settings are swapped below)
BUDGETS = {t: getattr(importlib.import_module(m), t)._hypothesis_internal_use_settings
           .max_examples for m, t in TESTS}
# this profile's examples per test: a share of TOTAL by the fixed budgets, at least 3 each,
# rounded up so that the shares add up to TOTAL at least (rounding to nearest lost one at 3000)
SHARES = {t: max(3, math.ceil(TOTAL * b / sum(BUDGETS.values()))) for t, b in BUDGETS.items()}


def test_seed_is_printed(capsys):
    """The seed of this run, in the output (``-s`` or ``-rA`` shows it; a failure always does)."""
    print(f"SKSET_FUZZ_SEED={SEED} SKSET_FUZZ_RANDOM_EXAMPLES={TOTAL}")
    assert str(SEED) in capsys.readouterr().out
    assert len(TESTS) >= 10 and sum(SHARES.values()) >= TOTAL


@pytest.mark.parametrize("module, test", TESTS, ids=[t for _, t in TESTS])
def test_fuzz_randomised(module, test):
    """One fuzz test on ``SHARES[test]`` random examples from ``SKSET_FUZZ_SEED`` (plus the
    test's position in the list, so that each test draws its own)."""
    fn = getattr(importlib.import_module(module), test)
    seed = SEED + TESTS.index((module, test))
    saved = (fn._hypothesis_internal_use_settings, fn._hypothesis_internal_use_seed)
    fn._hypothesis_internal_use_settings = settings(saved[0], max_examples=SHARES[test],
                                                    derandomize=False, database=None)
    fn._hypothesis_internal_use_seed = seed  # read by hypothesis when the test is called
    print(f"SKSET_FUZZ_SEED={SEED}: {module}.{test} on {SHARES[test]} examples")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # as the fuzz files' own filterwarnings marks
            fn()
    except BaseException as exc:
        exc.add_note(f"randomised fuzz profile: SKSET_FUZZ_SEED={SEED} (this test's seed "
                     f"{seed}) reproduces it: SKSET_FUZZ_SEED={SEED} pytest "
                     f"tests/test_fuzz_random.py -k {test}")
        raise
    finally:
        fn._hypothesis_internal_use_settings, fn._hypothesis_internal_use_seed = saved
