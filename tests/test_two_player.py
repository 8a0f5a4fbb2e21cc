"""The two-player PettingZoo env: API conformance, turn order, the rewards of each outcome."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from pettingzoo.test import api_test

from clevr_game.errors import InputError
from clevr_game.generate import generate_dataset
from clevr_game.layout import BOUND
from envs.game import Rewards
from envs.items import ItemPool, load_items
from envs.moves import STAY_BIN
from envs.two_player import ADVERSARY, ANSWER_VALUES, VQA_PLAYER, TwoPlayerEnv

STAY = np.full(20, STAY_BIN)


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> ItemPool:
    folder = tmp_path_factory.mktemp("items")
    generate_dataset(folder, 6, 2, seed=5, min_objects=3, max_objects=5, progress=False)
    return ItemPool(load_items(folder))


def _answer_index(answer: str) -> int:
    return ANSWER_VALUES.index(answer)


def _wrong_index(answer: str) -> int:
    return next(i for i, value in enumerate(ANSWER_VALUES) if value != answer)


@pytest.mark.parametrize("rounds", [1, 3])
def test_passes_the_pettingzoo_api_test(pool, rounds):
    env = TwoPlayerEnv(pool, rounds=rounds, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # advice on agent names and space classes, not failures
        api_test(env, num_cycles=60)


def test_a_valid_move_then_a_right_answer(pool):
    env = TwoPlayerEnv(pool, seed=1)
    env.reset(options={"item": 2})
    item = pool.items[2]
    assert env.agent_selection == ADVERSARY and env.current_item_id == item.item_id
    env.step(STAY)  # nothing moves: always valid
    assert env.agent_selection == VQA_PLAYER and env.rewards == {ADVERSARY: 0.0, VQA_PLAYER: 0.0}
    env.step(_answer_index(item.answer))
    assert env.rewards == {ADVERSARY: Rewards().fr, VQA_PLAYER: 1.0}
    assert all(env.terminations.values())
    assert env.infos[VQA_PLAYER]["new_answer"] == item.answer and env.infos[ADVERSARY]["valid"]


def test_a_wrong_answer_on_the_moved_scene_rewards_the_adversary(pool):
    env = TwoPlayerEnv(pool, seed=2, rewards=Rewards(dr=2.0))
    item = pool.items[0]
    for seed in range(50):  # find a valid move that really moves something
        env.reset(seed=seed, options={"item": 0})
        action = np.random.default_rng(seed).choice([2, 3, 4], 20)
        env.step(action)
        if env.agent_selection == VQA_PLAYER and env.infos[ADVERSARY]["moves"]:
            break
    else:
        pytest.fail("no valid move found")
    # The VQA player sees the moved scene, in scene order, in the camera frame.
    seen = env.observe(VQA_PLAYER)["objects"]
    n = len(item.scene)
    assert env.observation_space(VQA_PLAYER).contains(env.observe(VQA_PLAYER))
    moved = np.array(item.scene.coords()[:, :2])
    for obj, dx, dy in env.infos[ADVERSARY]["moves"]:
        moved[obj] += (dx, dy)
    assert not np.allclose(moved, item.scene.coords()[:, :2])
    right_behind = pool.view_axes[0]  # the camera's right and behind directions on the ground
    np.testing.assert_allclose(seen[:n, :2], moved @ right_behind.T / BOUND, atol=1e-6)
    env.step(_wrong_index(item.answer))
    assert env.rewards == {ADVERSARY: 2.0, VQA_PLAYER: -1.0}
    assert env.infos[ADVERSARY]["dropped"] and env.infos[ADVERSARY]["new_scene"] is not None


def test_an_invalid_move_ends_the_round_without_the_player(pool):
    env = TwoPlayerEnv(pool, mode="absolute", rounds=2, seed=3)
    env.reset(options={"item": 1})
    env.step(np.zeros(20, dtype=np.int64))  # every object to one grid cell: they overlap
    assert env.rewards == {ADVERSARY: Rewards().isr, VQA_PLAYER: 0.0}
    assert not env.infos[ADVERSARY]["valid"] and env.infos[ADVERSARY]["reason"]
    assert env.agent_selection == ADVERSARY and not any(env.terminations.values())  # round 2 begins
    env.step(np.zeros(20, dtype=np.int64))
    assert all(env.terminations.values())
    _, reward, terminated, _, _ = env.last()
    assert terminated and reward == Rewards().isr
    env.step(None)
    env.step(None)
    assert env.agents == []


def test_rounds_draw_items_with_the_seed(pool):
    def played(seed: int) -> list[str]:
        env = TwoPlayerEnv(pool, rounds=5)
        env.reset(seed=seed)
        ids = []
        while not all(env.terminations.values()):
            ids.append(env.current_item_id)
            env.step(STAY)
            env.step(0)
        return ids

    assert played(4) == played(4)
    assert len({tuple(played(s)) for s in range(4)}) > 1


def test_bad_setup_and_actions_are_one_line_errors(pool):
    with pytest.raises(InputError, match="rounds must be at least 1"):
        TwoPlayerEnv(pool, rounds=0)
    env = TwoPlayerEnv(pool, seed=0)
    env.reset()
    with pytest.raises(InputError, match="adversary action must be 20 bins"):
        env.step(np.full(20, 7))
    env.step(STAY)
    with pytest.raises(InputError, match="vqa_player action must be in 0..29"):
        env.step(len(ANSWER_VALUES))
