"""Bad input on every `meanfield study ...`: one line naming the argument, exit code 2, and
nothing left in the output folder."""

import os

import pytest

from meanfield.cli import main
from meanfield.studies import STUDIES

ALL = sorted(STUDIES)


def run(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exit_:  # argparse's own errors
        return exit_.code


def check_refused(capsys, argv, flag, out):
    assert run(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1, err  # one line
    assert flag in err[0], err[0]
    assert not out.exists() or not any(out.iterdir())


PER_STUDY = [
    # unknown preset
    *[(s, ["--preset", "huge"], "--preset") for s in ALL],
    # unknown activation
    *[
        (s, ["--activation", "swish9"], "--activation")
        for s in ("mean-ode", "sde", "response", "variance", "tangent-kernel")
    ],
    # Hurst index outside (0, 1)
    ("sde", ["--weights", "fbm", "--hurst", "1.0"], "--hurst"),
    ("phases", ["--weights", "fbm", "--hurst", "-0.2"], "--hurst"),
    ("phases", ["--weights", "fbm", "--heatmap-hurst", "0.5,1.5"], "--heatmap-hurst"),
    # empty and unsorted grids
    ("mean-ode", ["--L", ""], "--L"),
    ("mean-ode", ["--L", "16,8"], "--L"),
    ("mean-ode", ["--M", "4,4"], "--M"),
    ("sde", ["--L", ""], "--L"),
    ("phases", ["--beta", "1.0,0.5"], "--beta"),
    ("response", ["--depths", ""], "--depths"),
    ("response", ["--depths", "10,5"], "--depths"),
    ("variance", ["--gammas", ""], "--gammas"),
    ("tangent-kernel", ["--gammas", "1,0.5"], "--gammas"),
    # exponents and counts beyond what any study takes (they overflowed later)
    ("variance", ["--gammas", "1e300,1e301"], "--gammas"),
    ("tangent-kernel", ["--gammas", "0.5,4"], "--gammas"),
    ("sde", ["--batch", str(2**63)], "--batch"),
    ("mean-ode", ["--steps", str(2**63)], "--steps"),
    ("mean-ode", ["--inputs", str(10**9)], "--inputs"),
    # non-positive sizes
    ("mean-ode", ["--seeds", "0"], "--seeds"),
    ("mean-ode", ["--L", "0,8"], "--L"),
    ("mean-ode", ["--pad-units", "-1"], "--pad-units"),
    ("mean-ode", ["--unroll", "0"], "--unroll"),
    ("mean-ode", ["--seed-batch-units", "0"], "--seed-batch-units"),
    ("sde", ["--seeds", "-3"], "--seeds"),
    ("sde", ["--n-fine", "0"], "--n-fine"),
    ("phases", ["--d", "0"], "--d"),
    ("response", ["--width", "0"], "--width"),
    ("response", ["--inits", "-1"], "--inits"),
    ("variance", ["--nets", "0"], "--nets"),
    ("variance", ["--nets", "1"], "--nets"),  # no standard error from one network
    ("variance", ["--c-samples", "1"], "--c-samples"),
    ("tangent-kernel", ["--nets", "1"], "--nets"),
    ("phases", ["--bootstrap", "5"], "--bootstrap"),
    # no α* for relu: the response study, built around it, names the activation
    ("response", ["--activation", "relu", "--no-simulate"], "--activation"),
    # options of another depth law
    ("sde", ["--weights", "brownian", "--length-scale", "0.1"], "--length-scale"),
    ("sde", ["--weights", "fbm", "--rtol", "1e-8"], "--rtol"),
    ("sde", ["--weights", "smooth", "--young-solver", "euler"], "--young-solver"),
    ("sde", ["--weights", "smooth", "--n-fine", "64"], "--n-fine"),
    ("phases", ["--weights", "iid", "--length-scale", "0.1"], "--length-scale"),
    # the quadrature's check rule must be coarser; a zero input
    ("mean-ode", ["--order", "2"], "--order"),
    ("mean-ode", ["--d", "16"], "--d"),  # 2 nodes per coordinate: no checked reference
    ("mean-ode", ["--d", "1", "--inputs", "3"], "--d/--inputs"),
    ("tangent-kernel", ["--d", "0"], "--d"),
    # seeds outside [0, 2^31): refused before anything runs
    *[(s, ["--seed=-1"], "--seed") for s in ALL],
    *[(s, ["--seed", str(2**31)], "--seed") for s in ALL],
    # an order the quadrature cannot take: refused before the output folder is made
    ("mean-ode", ["--order", "100000"], "--order"),
    # options of a part that will not run: refused, not silently ignored
    ("regimes", ["--no-transfer", "--transfer-L", "4,8,16"], "--transfer-L"),
    ("regimes", ["--no-transfer", "--transfer-steps", "5"], "--transfer-steps"),
    ("trained-weights", ["--inits", "iid", "--hursts", "0.3"], "--hursts"),
]


@pytest.mark.parametrize(
    "study, extra, flag", PER_STUDY, ids=[f"{s}:{' '.join(a)}" for s, a, _ in PER_STUDY]
)
def test_bad_argument(tmp_path, capsys, study, extra, flag):
    out = tmp_path / "out"
    check_refused(capsys, ["study", study, *extra, "--out", str(out), "--no-progress"], flag, out)


@pytest.mark.parametrize("study", ALL)
def test_output_folder_that_is_a_file(tmp_path, capsys, study):
    out = tmp_path / "results.json"
    out.write_text("not a folder")
    assert run(["study", study, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out" in err[0]
    assert out.read_text() == "not a folder"


@pytest.mark.parametrize("study", ALL)
def test_unwritable_output_folder(tmp_path, capsys, monkeypatch, study):
    parent = tmp_path / "locked"
    parent.mkdir()
    out = parent / "out"
    if os.geteuid() == 0:
        # root writes through any mode bits: make the permission check itself say no
        import meanfield.harness.runner as runner

        real = runner.os.access
        monkeypatch.setattr(
            runner.os, "access", lambda p, mode: False if str(p) == str(parent) else real(p, mode)
        )
    else:
        parent.chmod(0o500)
    try:
        check_refused(capsys, ["study", study, "--out", str(out), "--no-progress"], "--out", out)
        assert not out.exists()
    finally:
        parent.chmod(0o700)
