"""`AdversarialSceneEnv`: the adversary's view of the game as a one-step gymnasium env."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from envs.defaults import PlayerLike, default_items, default_player
from envs.game import Game, Outcome, Rewards
from envs.items import MAX_OBJECTS, ItemPool, ItemsLike
from envs.moves import DEFAULT_STEP, MoveSpace, action_space, random_heads
from envs.observation import encode, observation_space


class AdversarialSceneEnv(gym.Env):
    """Each episode: one item, a random head -> object assignment, one move, done.

    Action: MultiDiscrete([7] * 20); head h moves its object by bin action[2h] on x
    and action[2h + 1] on y. `info` after the step carries the verdicts, the true,
    old and new answers, the moves and the new scene (every key: docs/game.md).

    :param items: an item folder (str or Path: CLEVR `scenes.json` + `questions.json`,
        or a CLEVR-POC `items.json`), a list of `envs.items.Item` or an ItemPool;
        default: the shipped sample (`envs.defaults.DEFAULT_ITEMS`).
    :param player: a Player, or a spec string for `players.registry.load` ("oracle",
        "state-transformer", "subprocess:<command line>", "file:PATH", an http URL);
        default: "state-transformer". A player made from a string is closed with the env.
    :param mode: "displacement" (bin 3 stays, the others move by (bin - 3) * step)
        or "absolute" (bins are cells of a 7 x 7 grid over the board).
    :param step: the displacement of one bin.
    :param dr: reward when a right old answer turns wrong; cr: any other change;
        fr: nothing changed; isr: the moved scene is invalid.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 1}

    def __init__(
        self,
        items: ItemsLike | None = None,
        player: PlayerLike | None = None,
        *,
        mode: str = "displacement",
        step: float = DEFAULT_STEP,
        dr: float = 1.0,
        cr: float = 0.1,
        fr: float = -0.1,
        isr: float = -0.8,
        rules: Any = None,
        visibility: Any = None,
        render_mode: str | None = None,
        renderer: Any = None,
    ):
        pool = default_items(items)
        player, self._owns_player = default_player(player)
        self.game = Game(pool, player, moves=MoveSpace(mode, step), rewards=Rewards(dr, cr, fr, isr),
                         rules=rules, visibility=visibility, renderer=renderer)
        self.observation_space = observation_space(pool)
        self.action_space = action_space()
        self.render_mode = render_mode
        self.renderer = renderer
        self._owns_renderer = renderer is None
        self._index = 0
        self._heads = np.arange(MAX_OBJECTS)
        self._last: Outcome | None = None

    @property
    def pool(self) -> ItemPool:
        return self.game.pool

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        options = options or {}
        self._index = int(options["item"]) if "item" in options else int(self.np_random.integers(len(self.pool)))
        self._heads = random_heads(self.np_random, 1)[0]
        self._last = None
        obs = encode(self.pool, np.array([self._index]), self._heads[None])
        item = self.pool.items[self._index]
        return {k: v[0] for k, v in obs.items()}, {"item_id": item.item_id, "heads": self._heads.copy()}

    def step(self, action: np.ndarray) -> tuple[dict, float, bool, bool, dict]:
        outcome = self.game.play(np.array([self._index]), self._heads[None], np.asarray(action)[None])[0]
        self._last = outcome
        obs = encode(self.pool, np.array([self._index]), self._heads[None])
        return {k: v[0] for k, v in obs.items()}, float(outcome.reward), True, False, outcome.info()

    def close(self) -> None:
        for renderer in {id(r): r for r in (self.renderer, self.game.renderer) if r is not None}.values():
            if self._owns_renderer:
                renderer.close()
        if self._owns_player:
            self.game.player.close()
            self._owns_player = False
        super().close()

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        if self.renderer is None:
            from clevr_game.render import Renderer

            self.renderer = self.game.renderer or Renderer("fast")  # closed with the env
        scene = self._last.new_scene if self._last and self._last.new_scene else self.pool.items[self._index].scene
        return self.renderer.render_array(scene)
