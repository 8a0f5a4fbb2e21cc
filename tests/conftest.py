"""Shared fixtures: the reference data beside the repository (skipped cleanly when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("CLEVR_GAME_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"reference data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def clevr_real(shared_data: Path) -> Path:
    return shared_data / "clevr_real"


@pytest.fixture(scope="session")
def clevr_templates_dir(shared_data: Path) -> Path:
    return shared_data / "clevr_dataset_gen" / "templates"
