"""The gradient part's grid: every (architecture, activation, initialisation, α) it runs
at each depth (read by the study and, to size its records, by its schema)."""

from ...models import plain

ALPHAS = ("1", "1/sqrt(L)")  # the residual scalings; a plain network has none


def configurations(activations) -> list[dict]:
    """Every (architecture, activation, init, alpha) of the gradient part."""
    out = []
    for act in activations:
        for arch in plain.ARCHITECTURES:
            for init in plain.INITS:
                for alpha in ("1",) if arch == "plain" else ALPHAS:
                    out.append(
                        {"architecture": arch, "activation": act, "init": init, "alpha": alpha}
                    )
    return out
