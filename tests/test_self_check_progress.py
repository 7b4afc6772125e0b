"""The self-check's line says its total (issue 77, item 4): the operations the last
self-check of the same point of the same configuration took, kept in the artifact cache;
a first run, another configuration, or a point that raised has none to go by."""

import pytest

from meanfield import _numpy_ops
from meanfield.harness.self_check import operations_progress


def test_the_self_checks_line_has_its_last_runs_total(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MEANFIELD_ARTIFACT_CACHE", str(tmp_path))
    done = {"add": 0}
    monkeypatch.setattr(_numpy_ops, "counts", lambda: dict(done))

    def check(point, config, ops, fail=False):
        with operations_progress(point, True, config):
            done["add"] += ops
            if fail:
                raise RuntimeError("the point raised")
        return capsys.readouterr().err

    first = check("L=4,M=8", "config-a", 1234)
    assert "self-check: L=4,M=8" in first and "1.23k/" not in first  # nothing to go by
    again = check("L=4,M=8", "config-a", 1234)
    assert "1.23k/1.23k" in again  # the last run's count is the total
    assert "/1.23k" not in check("L=4,M=8", "config-b", 1234)  # another configuration
    with pytest.raises(RuntimeError):
        check("L=8,M=8", "config-a", 99, fail=True)
    assert "/99" not in check("L=8,M=8", "config-a", 5)  # a point that raised: forgotten
    monkeypatch.setenv("MEANFIELD_ARTIFACT_CACHE", "off")
    assert "/1.23k" not in check("L=4,M=8", "config-a", 1234)  # no cache, no total
