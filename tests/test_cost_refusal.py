"""Cost before work: configurations beyond this machine's memory (or a stated limit) and
inputs that stall a solver are refused before anything is allocated or written, in one
line giving the estimate."""

import pytest

from meanfield.cli import main


def run(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)


HUGE = str(10**9)
CASES = [
    # the four inputs that ran for minutes before any error
    ("mean-ode", ["--lr", "1000"], "--lr"),
    ("mean-ode", ["--sigma-xi", "1e300"], "--sigma-xi"),
    ("phases", ["--weights", "smooth", "--length-scale", "1e-9"], "--length-scale"),
    ("response", ["--depths", "2,1000000"], "--depths"),
    # beyond the machine's memory or the stated limits
    ("mean-ode", ["--L", "4,8", "--M", f"1,{HUGE}"], "--L/--M/--seeds"),
    ("mean-ode", ["--seeds", HUGE], "--seeds"),
    ("mean-ode", ["--steps", HUGE], "--steps"),
    ("sde", ["--n-fine", str(2**34)], "--n-fine"),
    ("phases", ["--d", "100000"], "--d"),
    ("response", ["--width", HUGE], "--width"),
    ("variance", ["--L", f"4,{HUGE}"], "--L"),
    ("tangent-kernel", ["--d", HUGE], "--d"),
]


@pytest.mark.parametrize(
    "study, extra, flag", CASES, ids=[f"{s} {' '.join(a)}" for s, a, _ in CASES]
)
def test_refused_at_once(tmp_path, capsys, study, extra, flag):
    out = tmp_path / "out"
    assert run(["study", study, *extra, "--out", str(out), "--no-progress"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and flag in err[0], err
    assert not out.exists()


def test_the_estimate_is_given_and_a_stated_limit_applies(tmp_path, capsys, monkeypatch):
    """MEANFIELD_MEMORY_LIMIT states a smaller limit: a grid that fits the machine is
    then refused, with its estimate in GB."""
    monkeypatch.setenv("MEANFIELD_MEMORY_LIMIT", "1000")
    out = tmp_path / "out"
    assert run(["study", "variance", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "needs about" in err and "GB" in err and "MEANFIELD_MEMORY_LIMIT" in err
    assert not out.exists()


@pytest.mark.parametrize("limit", ["abc", "inf", "nan", "-5", "0"])
def test_a_memory_limit_that_is_not_a_size_is_refused(tmp_path, capsys, monkeypatch, limit):
    """MEANFIELD_MEMORY_LIMIT=abc was ignored and =inf raised OverflowError."""
    monkeypatch.setenv("MEANFIELD_MEMORY_LIMIT", limit)
    out = tmp_path / "out"
    assert run(["study", "variance", "--out", str(out), "--no-progress"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "error: MEANFIELD_MEMORY_LIMIT:" in err[0], err
    assert repr(limit) in err[0] and not out.exists()


def test_a_tiny_length_scale_is_refused_before_allocating():
    from meanfield.depth.smooth import spectral_feature_count, spectral_features

    assert spectral_feature_count(1e-9) > 10**9
    with pytest.raises(ValueError, match="too small"):
        spectral_features(1e-9)


@pytest.mark.parametrize(
    ("name", "options", "flags"),
    [
        ("shapes", {"L": [4, 100000], "M": [4, 100000], "D": [8, 1000]}, "--L/--M/--D"),
        ("two-layer", {"M": [4, 10**9], "D": [8, 10**5]}, "--M/--D"),
    ],
)
def test_seed_002_studies_refuse_networks_beyond_memory(tmp_path, name, options, flags):
    """shapes and two-layer: one network of the largest point must fit, refused before
    any folder is made."""
    from meanfield.studies import StudyInputError, run_study

    out = tmp_path / "s"
    with pytest.raises(StudyInputError, match=f"^{flags}: one network .* needs about"):
        run_study(name, out=str(out), **options)
    assert not out.exists()
