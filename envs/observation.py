"""What the adversary sees: object tokens in head order and question tokens.

objects: (10, 7) float32 per head slot = the object's position along the camera's
right and behind directions / 3 (so left/right and front/behind are one coordinate
each, as CLEVR defines them), present, then size, colour, material, shape ids in
the CLEVR-POC vocabulary (whose value lists extend CLEVR's); zeros for an empty slot.
question: (48,) float32 word ids of `clevr_game.text` (0 pads, 1 is unknown).
"""

from __future__ import annotations

import weakref

import numpy as np
from gymnasium import spaces

from clevr_game.layout import BOUND
from clevr_game.vocab import ATTRIBUTES, CLEVR_POC
from envs.items import MAX_OBJECTS, ItemPool

OBJECT_FEATURES = 3 + len(ATTRIBUTES)


def observation_space(pool: ItemPool) -> spaces.Dict:
    high_ids = [len(CLEVR_POC.values(a)) - 1 for a in ATTRIBUTES]
    # The board is a square in world axes; rotated into the camera frame its corners reach sqrt(2).
    reach = float(np.sqrt(2.0))
    low = np.tile(np.array([-reach, -reach, 0.0] + [0.0] * len(ATTRIBUTES), dtype=np.float32), (MAX_OBJECTS, 1))
    high = np.tile(np.array([reach, reach, 1.0] + high_ids, dtype=np.float32), (MAX_OBJECTS, 1))
    return spaces.Dict({
        "objects": spaces.Box(low, high, dtype=np.float32),
        "question": spaces.Box(0.0, float(len(pool.words) - 1), (pool.question_tokens.shape[1],), dtype=np.float32),
    })


def encode(pool: ItemPool, indices: np.ndarray, heads: np.ndarray,
           xy: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """(B,) items and (B, 10) head -> object slot assignments -> batched observation arrays.

    `xy` (B, 10, 2) gives the objects other positions than the pool's (a moved scene).
    """
    indices = np.asarray(indices)
    if xy is None:
        # The unmoved case (every step of the vector env): one gather from the pool's table.
        objects, questions = _pool_tables(pool)
        return {"objects": objects[indices[:, None], heads], "question": questions[indices]}
    rows = np.arange(len(indices))[:, None]
    objects = np.empty((len(indices), MAX_OBJECTS, OBJECT_FEATURES), dtype=np.float32)
    _fill(objects, xy[rows, heads], pool.view_axes[indices], pool.present[indices][rows, heads],
          pool.attributes[indices][rows, heads])
    return {"objects": objects, "question": pool.question_tokens[indices].astype(np.float32)}


_TABLES: weakref.WeakKeyDictionary[ItemPool, tuple[np.ndarray, np.ndarray]] = weakref.WeakKeyDictionary()


def _pool_tables(pool: ItemPool) -> tuple[np.ndarray, np.ndarray]:
    """Every item's objects in scene order (I, 10, 7) and question (I, 48), as float32, made once per pool."""
    tables = _TABLES.get(pool)
    if tables is None:
        objects = np.empty((len(pool), MAX_OBJECTS, OBJECT_FEATURES), dtype=np.float32)
        _fill(objects, pool.xy, pool.view_axes, pool.present, pool.attributes)
        tables = _TABLES[pool] = (objects, pool.question_tokens.astype(np.float32))
    return tables


def _fill(objects: np.ndarray, xy: np.ndarray, view_axes: np.ndarray, present: np.ndarray,
          attributes: np.ndarray) -> None:
    view = np.matmul(xy, view_axes.transpose(0, 2, 1)) / BOUND
    objects[..., 0:2] = np.where(present[..., None], view, 0.0)
    objects[..., 2] = present
    objects[..., 3:] = np.where(present[..., None], attributes, 0)
