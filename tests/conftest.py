"""Shared test fixtures.

Real data sets live in ``../shared/datasets`` beside the checkout and are not vendored;
tests that need them use the ``shared_datasets`` fixture, which skips with a clear message
when the folder is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")

# One XLA host device per default chain, as the ``crowdrank`` entry point sets up; must run
# before JAX starts (an explicit call, not an import side effect of inference.nuts).
from inference.nuts import configure_host_devices

configure_host_devices()

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATASETS = Path(os.environ.get("CROWDRANK_DATASETS", ROOT.parent / "shared" / "datasets"))


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    if not SHARED_DATASETS.is_dir():
        pytest.skip(f"shared data sets not found at {SHARED_DATASETS} "
                    "(set CROWDRANK_DATASETS to their folder)")
    return SHARED_DATASETS
