"""The cells of a (σ_v, D) phase diagram (`two_layer_phases`, `resnet_phases`) that a slope
is fitted over, and those past criterion 1's boundary: shared by the studies' verdicts and
their figures."""

PAST_BOUNDARY = 0.5  # criterion 1's boundary for the deep ResNet: ‖h^L − h^0‖_D vs ‖h^0‖ ≈ 1


def large_cells(points, threshold: float = PAST_BOUNDARY) -> set:
    """The (D, s_v) of the cells past criterion 1's boundary: mean ‖h^L − h^0‖_D at least
    `threshold`, or not finite (None)."""
    return {
        (p["D"], p["s_v"])
        for p in points
        if p["hidden"]["mean"] is None or p["hidden"]["mean"] >= threshold
    }


def fit_cells(f) -> set:
    """The (D, s_v) of the cells a slope is fitted over."""
    fixed = f["fixed"]
    if f["against"] == "D":
        return {(D, fixed["s_v"]) for D in f["sizes"]}
    return {(fixed["D"], s) for s in f["sizes"]}
