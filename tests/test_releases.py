"""Known-bad JAX releases (`meanfield.runtime.releases`): excluded by the dependencies, refused by
`meanfield info` and every study in one line, run only on an explicit override, which
results.json records."""

import json
import re
import tomllib
from pathlib import Path

import pytest

import meanfield as mf
from meanfield.cli import main
from meanfield.runtime import releases

ROOT = Path(__file__).resolve().parents[1]
BAD = {"jax": "0.10.2", "jaxlib": "0.10.2"}


@pytest.fixture
def on_a_bad_release(monkeypatch):
    monkeypatch.setattr(releases, "installed", lambda: dict(BAD))
    monkeypatch.delenv(releases.OVERRIDE_ENV, raising=False)


def test_the_listed_release_is_known_bad_and_others_are_not():
    assert releases.known_bad(BAD).version == "0.10.2"
    assert releases.known_bad({"jax": "0.10.1", "jaxlib": "0.10.1"}) is None
    assert releases.known_bad({"jax": "0.10.1", "jaxlib": "0.10.2"}).package == "jaxlib"
    assert releases.known_bad() is None  # the suite itself runs on a good release


def test_the_dependencies_exclude_every_listed_release():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = deps["dependencies"] + deps["optional-dependencies"]["gpu"]
    for entry in releases.KNOWN_BAD:
        spec = next(s for s in specs if re.match(rf"{entry.package}(\[[^]]*\])?[<>=!~]", s)
                    or (entry.package == "jax" and s.startswith("jax[")))  # fmt: skip
        assert f"!={entry.version}" in spec, spec


def test_a_refusal_is_one_line_with_release_reason_and_fix(on_a_bad_release):
    with pytest.raises(releases.KnownBadReleaseError) as err:
        releases.check_release()
    text = str(err.value)
    assert len(text.splitlines()) == 1
    for part in ("jaxlib 0.10.2", "miscompiles", "jax-ml/jax#39103", "pip install",
                 "--allow-known-bad-jax"):  # fmt: skip
        assert part in text


def test_override_by_argument_or_environment(on_a_bad_release, monkeypatch):
    assert releases.check_release(allow=True).version == "0.10.2"
    monkeypatch.setenv(releases.OVERRIDE_ENV, "1")
    assert releases.check_release().version == "0.10.2"
    monkeypatch.setenv(releases.OVERRIDE_ENV, "0")
    with pytest.raises(releases.KnownBadReleaseError):
        releases.check_release()


def test_info_and_studies_refuse_before_writing_anything(on_a_bad_release, tmp_path, capsys):
    assert main(["info"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("meanfield info: error: jaxlib 0.10.2")
    out = tmp_path / "s"
    assert main(["study", "sde", "--weights", "smooth", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "meanfield study sde: error: jaxlib 0.10.2" in err
    assert not out.exists()
    with pytest.raises(releases.KnownBadReleaseError, match="^allow_known_bad_jax: jaxlib"):
        mf.run_study("sde", out=str(out), weights="smooth", no_progress=True)
    assert not out.exists()
    assert main(["info", "--allow-known-bad-jax"]) == 0


def test_an_overridden_run_is_recorded(on_a_bad_release, tmp_path, monkeypatch):
    out = tmp_path / "s"
    r = mf.run_study(
        "sde", out=str(out), weights="smooth", L=[4, 8, 16], seeds=6, batch=4, no_progress=True,
        allow_known_bad_jax=True,
    )  # fmt: skip
    assert "jaxlib 0.10.2" in r["versions"]["known_bad_release"]
    assert r["config"].get("allow_known_bad_jax") is None  # not part of the configuration
    monkeypatch.undo()  # the release this suite runs on
    clean = mf.run_study("sde", out=str(tmp_path / "t"), weights="smooth", L=[4, 8, 16], batch=4,
                         seeds=6, no_progress=True)  # fmt: skip
    assert clean["versions"]["known_bad_release"] is None
    assert json.loads((out / "results.json").read_text())["versions"]["known_bad_release"]


def test_import_warns_on_a_bad_release(on_a_bad_release):
    with pytest.warns(UserWarning, match="jaxlib 0.10.2 is known to compute wrong results"):
        releases.warn_on_import()
