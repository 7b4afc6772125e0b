"""The fast tier's list (tests/tiers.py, tests/slow_tests.txt) names tests that exist, and
the rule that writes it (benchmarks/fast_tier.py) marks what it should."""

import sys
from pathlib import Path

from tiers import function_id, slow_tests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import fast_tier  # noqa: E402


def test_every_listed_slow_test_exists():
    listed = slow_tests()
    assert listed, "tests/slow_tests.txt lists no test"
    missing = []
    for entry in listed:
        path, name = entry.split("::", 1)
        if not (ROOT / path).exists() or name not in fast_tier.test_functions(ROOT / path):
            missing.append(entry)
    assert not missing, f"listed as slow but not a test function (renamed?): {missing}"


def test_the_slow_rule_sums_a_functions_parameters_and_marks_a_heavy_module_fixture(tmp_path):
    log = "\n".join(
        [
            "0.60s call     tests/test_a.py::test_one[x]",
            "0.60s call     tests/test_a.py::test_one[y]",  # 1.2 s in all: slow
            "0.90s call     tests/test_a.py::test_two",  # fast
            "5.00s setup    tests/test_tiers.py::test_every_listed_slow_test_exists",
            "0.01s call     tests/test_tiers.py::test_every_listed_slow_test_exists",
            "12.0s call     tests/test_b.py::TestX::test_three[p]",
        ]
    )
    slow = fast_tier.slow_functions(log, above=1.0)
    assert "tests/test_a.py::test_one" in slow
    assert "tests/test_a.py::test_two" not in slow
    assert "tests/test_b.py::TestX::test_three" in slow
    # a module fixture's setup above the line: every test of that file is slow
    assert {f"tests/test_tiers.py::{n}" for n in fast_tier.test_functions(Path(__file__))} <= set(
        slow
    )
    assert function_id("tests/test_a.py::test_one[x-1]") == "tests/test_a.py::test_one"
