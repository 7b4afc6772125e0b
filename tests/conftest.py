"""Shared test configuration: float64, strict rank promotion, seeded keys."""

import os

import jax
import pytest

# tests write nothing outside their tmp folders: no persistent compilation cache from the CLI
os.environ.setdefault("MEANFIELD_COMPILE_CACHE", "off")

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")

SEED = int(os.environ.get("MEANFIELD_TEST_SEED", "0"))


@pytest.fixture
def seed() -> int:
    return SEED


@pytest.fixture
def key(request):
    """A `jax.random` key; its seed is shown in the failure report (set MEANFIELD_TEST_SEED)."""
    request.node.user_properties.append(("seed", SEED))
    return jax.random.key(SEED)


def pytest_report_header(config):
    return f"meanfield test seed: {SEED} (set MEANFIELD_TEST_SEED to change)"
