"""Shared fixtures: CLEVR's reference files shipped in the package, and a module's own render cache.

Real CLEVR scenes and questions (CC BY 4.0) and CLEVR 1.0's templates, catalogue and
Blender assets (BSD) lie in `clevr_game/data/` with their attribution, so no test
needs data from outside the repository.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from clevr_game.datafiles import CLEVR_REAL_DIR, CLEVR_TEMPLATE_DIR

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def clevr_real() -> Path:
    return CLEVR_REAL_DIR


@pytest.fixture(scope="module")
def clevr_templates_dir() -> Path:
    return CLEVR_TEMPLATE_DIR


@pytest.fixture(scope="module")
def own_render_cache(tmp_path_factory: pytest.TempPathFactory):
    """A module's own render cache (`pytestmark = pytest.mark.usefixtures("own_render_cache")`):
    its tests measure real renders and leave the user's cache alone."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CLEVR_GAME_RENDER_CACHE", str(tmp_path_factory.mktemp("render-cache")))
        yield
