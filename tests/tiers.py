"""The suite's two tiers. `pytest -m "not slow"` is the fast tier, an answer in minutes
for a contributor's loop that still runs code of every module of the package
(`benchmarks/fast_tier.py` times it and checks that); `pytest` runs everything, as CI
and the README do.

A test function is slow when its calls (all its parameters together) took more than
`SLOW_ABOVE_S` seconds in the suite's measured run on the 2-core CI machine, or when its
test file does (`SLOW_FILES`: files whose every test starts a study or a subprocess).
`python benchmarks/fast_tier.py --update LOG` rewrites `tests/slow_tests.txt` from the
`--durations=0` output of a whole run; a new test is fast until it is listed."""

from pathlib import Path

SLOW_ABOVE_S = 3.0
SLOW_LIST = Path(__file__).with_name("slow_tests.txt")


def slow_tests() -> frozenset[str]:
    """The listed slow tests, as `path::function` (parameters left out)."""
    lines = SLOW_LIST.read_text().splitlines() if SLOW_LIST.exists() else []
    return frozenset(s.strip() for s in lines if s.strip() and not s.startswith("#"))


def function_id(nodeid: str) -> str:
    """`tests/test_x.py::test_f[param]` -> `tests/test_x.py::test_f`."""
    return nodeid.split("[", 1)[0]
