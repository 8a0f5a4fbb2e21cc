"""Shared fixtures: the reference data beside the repository (skipped cleanly when absent).

When it is absent, the run's summary says how many tests skipped for that reason
and where the data was looked for, so a fresh clone does not need `-rs` to see why.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("CLEVR_GAME_SHARED_DATA", REPO.parent / "shared" / "data"))
MISSING_DATA_REASON = f"reference data not found at {SHARED_DATA}"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(MISSING_DATA_REASON)
    return SHARED_DATA


@pytest.fixture(scope="session")
def clevr_real(shared_data: Path) -> Path:
    return shared_data / "clevr_real"


@pytest.fixture(scope="module")
def own_render_cache(tmp_path_factory: pytest.TempPathFactory):
    """A module's own render cache (`pytestmark = pytest.mark.usefixtures("own_render_cache")`):
    its tests measure real renders and leave the user's cache alone."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CLEVR_GAME_RENDER_CACHE", str(tmp_path_factory.mktemp("render-cache")))
        yield


@pytest.fixture(scope="session")
def clevr_templates_dir(shared_data: Path) -> Path:
    return shared_data / "clevr_dataset_gen" / "templates"


def skipped_for_missing_data(reports: list) -> int:
    """How many skip reports carry the missing-reference-data reason."""
    count = 0
    for report in reports:
        longrepr = getattr(report, "longrepr", None)
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        count += MISSING_DATA_REASON in reason
    return count


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    count = skipped_for_missing_data(terminalreporter.stats.get("skipped", []))
    if count:
        terminalreporter.write_line(
            f"{count} test{'s' if count != 1 else ''} skipped: {MISSING_DATA_REASON} "
            "(set CLEVR_GAME_SHARED_DATA to the folder holding clevr_real/ and clevr_dataset_gen/)",
            yellow=True,
        )
