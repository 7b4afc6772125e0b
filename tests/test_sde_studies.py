"""Tiny end-to-end runs of `meanfield study sde` and `meanfield study phases`, and their
bad-input errors."""

import json

import pytest

from meanfield.cli import main

SCHEMA = ("study", "config", "points", "fits", "reference", "timing")


def exit_code(argv) -> int:
    """`main`'s return value, or the code of the SystemExit argparse raises."""
    try:
        return main(argv)
    except SystemExit as exit_:
        return exit_.code


def _run(out, *argv):
    assert main(["study", *argv, "--out", str(out), "--no-progress"]) == 0
    return json.loads((out / "results.json").read_text())


@pytest.mark.parametrize(
    "weights, extra",
    [
        ("brownian", ["--n-fine", "256"]),
        ("fbm", ["--hurst", "0.75", "--n-fine", "256"]),
        ("smooth", []),  # no fine grid: the limit is an adaptive ODE solve
    ],
)
def test_sde_study_end_to_end(tmp_path, weights, extra, self_checked, monkeypatch):
    if weights == "brownian":  # its self-check is fbm's route with H = 1/2: checked there
        monkeypatch.setenv("MEANFIELD_NO_SELF_CHECK", "1")
    r = _run(
        tmp_path / weights,
        "sde",
        "--weights",
        weights,
        *extra,
        "--L",
        "4,8,16",
        "--seeds",
        "6",
        "--batch",
        "4",
    )
    for key in SCHEMA:
        assert key in r
    if weights == "brownian":
        assert not r["self_check"] and r["self_check_skipped"]
    else:
        self_checked(r)
    assert [p["L"] for p in r["points"]] == [4, 8, 16]
    for p in r["points"]:
        assert p["error_final"]["count"] + p["error_final"]["exploded"] == 6
        assert p["error_sup"]["mean"] >= p["error_final"]["mean"]
    assert "error_estimate" in r["reference"]
    assert {f["quantity"] for f in r["fits"]} == {"error_final", "error_sup"}
    assert (tmp_path / weights / "strong_error.png").stat().st_size > 0


def test_phases_study_rademacher_and_fbm_heatmap(tmp_path, self_checked):
    """Symmetric ±1/sqrt(d) weights with β = 0 (the original ResNet, reported as explosion),
    then fBm with its (β, H) heatmap."""
    r = _run(
        tmp_path / "rademacher",
        "phases",
        "--weights",
        "rademacher",
        "--L",
        "8,16",
        "--beta",
        "0,0.5,1.0",
        "--seeds",
        "8",
        "--d",
        "8",
        "--bootstrap",
        "20",
    )
    for key in SCHEMA[:5]:
        assert key in r
    self_checked(r)
    c = r["critical_beta"]
    assert {"estimate", "ci95", "theory"} <= set(c) and c["theory"] == 0.5
    assert c["phases"][0] == "explosion"  # β = 0
    assert len(r["points"]) == 6
    assert "stability_bounds" in r
    rows = r["stability_bounds"]["per_L"]
    assert all(0 <= f["fraction_inside"] <= 1 for row in rows for f in row["forward_sq"])
    f = _run(
        tmp_path / "fbm",
        "phases",
        "--weights",
        "fbm",
        "--hurst",
        "0.7",
        "--L",
        "8,16",
        "--beta",
        "0.25,0.75,1.25",
        "--seeds",
        "8",
        "--d",
        "8",
        "--bootstrap",
        "20",
        "--heatmap-hurst",
        "0.3,0.9",
    )
    assert f["heatmap"]["hurst"] == [0.3, 0.9]
    assert len(f["heatmap"]["slope_forward"]) == 2
    assert sorted(p.name for p in (tmp_path / "fbm").glob("*.png"))


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["sde", "--weights", "fbm", "--hurst", "1.2"], "--hurst"),
        (["sde", "--weights", "fbm", "--hurst", "0.3"], "--hurst"),
        (["sde", "--weights", "brownian", "--hurst", "0.7"], "--hurst"),
        (["sde", "--L", "4,8", "--n-fine", "24"], "--n-fine"),
        (["sde", "--L", "3,7"], "--L"),  # 3 does not divide 7: s = 2k/7 read as k/3
        (["sde", "--weights", "smooth", "--L", "4,6"], "--L"),
        (["sde", "--L", "8"], "--L"),
        (["sde", "--L", "8,4"], "--L"),
        (["sde", "--weights", "smooth", "--length-scale", "0"], "--length-scale"),
        (["sde", "--weights", "levy"], "--weights"),
        (["phases", "--weights", "fbm", "--hurst", "0"], "--hurst"),
        (["phases", "--beta", ""], "--beta"),
        (["phases", "--beta", "0.5"], "--beta"),
        (["phases", "--L", "16,8"], "--L"),
        (["phases", "--weights", "fbm", "--L", "8,12"], "--L"),
        (["phases", "--seeds", "0"], "--seeds"),
    ],
)
def test_bad_input_exits_2_naming_the_argument(tmp_path, capsys, argv, flag):
    out = tmp_path / "out"
    assert exit_code(["study", *argv, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) >= 1 and flag in err[-1]
    assert not out.exists() or not any(out.iterdir())


def test_fbm_note_states_the_local_slopes_measured():
    """The fBm figure's note is computed from the points: the local slopes at the shallowest
    and deepest pairs of depths, and whether they come nearer the theory's −(2H − 1); data
    that steepen instead make it say so."""
    from meanfield.studies.sde.plot import fbm_note, local_slopes

    def rows(slopes):
        out, m = [{"L": 8, "error_final": {"mean": 1.0}}], 1.0
        for i, s in enumerate(slopes):
            m *= 2.0**s
            out.append({"L": 8 * 2 ** (i + 1), "error_final": {"mean": m}})
        return out

    flattening = rows([-0.83, -0.7, -0.6, -0.55])  # the H100 run's shape (RESULTS.md)
    assert [round(s, 6) for *_, s in local_slopes(flattening, "error_final")] == [
        -0.83, -0.7, -0.6, -0.55,
    ]  # fmt: skip
    note = fbm_note(flattening, "error_final", -0.5)
    assert "-0.83 at L 8–16" in note.replace("−", "-") and "-0.55 at L 64–128" in note
    assert "flattening towards the theory" in note
    steepening = rows([-0.55, -0.7, -0.9])
    note = fbm_note(steepening, "error_final", -0.5)
    assert "not nearer the theory" in note and "flattening" not in note
    assert "no change\nof the local slope" in fbm_note(rows([-0.8]), "error_final", -0.5)


def test_sde_headline_leads_with_the_depth_law(tmp_path, capsys, monkeypatch):
    """Issue 74: the strong error's exponent from the law with Euler's next order
    (`a L^-p + c L^-2p`, paired over the seeds' paths) leads the headline; the one-term
    slopes follow as secondary; the figure draws the law."""
    monkeypatch.setenv("MEANFIELD_NO_SELF_CHECK", "1")  # checked by the end-to-end test
    r = _run(tmp_path / "s", "sde", "--weights", "smooth", "--L", "4,8,16,32", "--seeds", "6",
             "--batch", "6")  # fmt: skip
    printed = capsys.readouterr().out.splitlines()
    laws = r["rates"]
    assert [law["quantity"] for law in laws] == ["error_final", "error_sup"]
    for law in laws:
        assert law["part"] == "depth" and law["model"] == "a L^-p + c L^-2p"
        assert law["theory"]["p"]["value"] == 1.0 and law["draws"] == 6
        assert law["p_ci95"][0] <= law["p"] <= law["p_ci95"][1]
    assert all(f["secondary"] for f in r["fits"])
    head = next(i for i, line in enumerate(printed) if "rates, a L^-p + c L^-2p" in line)
    second = next(i for i, line in enumerate(printed) if "one-term slopes (secondary" in line)
    assert head < second
    assert not any("OUTSIDE" in line for line in printed[second:] if "slope" in line)


def test_the_figure_says_only_what_it_draws(tmp_path, monkeypatch):
    """Issue 77: the smooth-weights figure's header promised a dashed fit and a solid law,
    but the points were joined by solid lines that hid the dashed fit, and no law was
    drawn. The points now stand alone (the dashed fit is visible) and the header names the
    law only where one is drawn; the depth axis is labelled at the data's depths."""
    import matplotlib.pyplot as plt
    import numpy as np

    from meanfield.stats.fits import exponent_theory, fit_loglog
    from meanfield.studies.sde import plot as sde_plot

    figs = []
    monkeypatch.setattr(sde_plot, "save_figure", lambda fig, path, **kw: figs.append(fig))
    rng = np.random.default_rng(0)
    Ls = [4, 8, 16]
    points = [{"L": L, **{q: {"mean": 0.9 / L * (1 + k), "std": 0.1} for k, q in
                          enumerate(("error_final", "error_sup"))}} for L in Ls]  # fmt: skip
    fits = [fit_loglog(Ls, [0.9 / L * rng.lognormal(0, 0.1, 8) for L in Ls], quantity=q,
                       against="L", theory=-1.0) for q in ("error_final", "error_sup")]  # fmt: skip
    cfg = {"d": 3, "activation": "tanh", "seeds": 8, "weights": "smooth", "length_scale": 0.2}
    sde_plot.plot_strong_error(tmp_path, cfg, points, fits, {"error_estimate": 1e-11})
    fig = figs.pop()
    ax = fig.axes[0]
    header = fig._suptitle.get_text()
    assert "dashed: one-term slope" in header and "the law" not in header
    marked = [ln for ln in ax.get_lines() if ln.get_marker() not in ("None", None, "")]
    assert marked and all(ln.get_linestyle() == "None" for ln in marked)
    assert any(ln.get_linestyle() == "--" for ln in ax.get_lines())
    assert [t.get_text() for t in ax.get_xticklabels()] == ["4", "8", "16"]
    plt.close(fig)
    law = {"quantity": "error_final", "p": 1.0, "p_ci95": [0.9, 1.1], "a": 0.9,
           "c_over_a": 0.0, "theory": {"p": exponent_theory(1.0, [0.9, 1.1])}}  # fmt: skip
    sde_plot.plot_strong_error(tmp_path, cfg, points, fits, {"error_estimate": 1e-11}, [law])
    fig = figs.pop()
    assert "solid: the law" in fig._suptitle.get_text()
    plt.close(fig)
