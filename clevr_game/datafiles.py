"""Where the data shipped inside the package lies: the project's own and CLEVR's (with their licences).

`clevr_game/data/clevr_1.0/` holds CLEVR 1.0's templates, program catalogue,
synonyms and Blender assets (BSD, clevr-dataset-gen); `clevr_game/data/clevr_real/`
real CLEVR v1.0 scenes and questions (CC BY 4.0). Each folder has a README with
its attribution.
"""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
CLEVR_DIR = DATA_DIR / "clevr_1.0"
CLEVR_TEMPLATE_DIR = CLEVR_DIR / "templates"
CLEVR_SYNONYMS = CLEVR_DIR / "synonyms.json"
CLEVR_METADATA = CLEVR_DIR / "metadata.json"
CLEVR_ASSETS_DIR = CLEVR_DIR / "blend"
CLEVR_REAL_DIR = DATA_DIR / "clevr_real"
CLEVR_VAL_SCENES = CLEVR_REAL_DIR / "CLEVR_val_scenes_500.json"
CLEVR_TRAIN_SCENES = CLEVR_REAL_DIR / "CLEVR_train_scenes_1000.json"
SAMPLE_DIR = DATA_DIR / "sample"
