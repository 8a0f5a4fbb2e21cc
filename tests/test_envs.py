"""The game: oracle invariance, referees' reasons, rewards, determinism, gymnasium and SB3 conformance."""

from __future__ import annotations

import shutil
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import pytest

from agents.sb3_vec_env import Sb3VecEnv
from clevr_game.layout import BOUND
from envs import ENV_ID
from envs.adversarial import AdversarialSceneEnv
from envs.game import Game, Rewards
from envs.items import ItemPool, clevr_items, load_items
from envs.minigames import MiniGames, split_minigames
from envs.moves import STAY_BIN, MoveSpace
from envs.play import play_moves, summarise
from envs.vector import AdversarialVectorEnv
from players.oracle import OraclePlayer
from players.protocol import Answer, Player, Query


@pytest.fixture(scope="module")
def real_items(clevr_real):
    return clevr_items(clevr_real / "CLEVR_val_scenes_sample11.json",
                       clevr_real / "CLEVR_val_questions_sample9.json")


@pytest.fixture(scope="module")
def real_pool(real_items):
    return ItemPool(real_items)


def stay_actions(batch: int = 1) -> np.ndarray:
    return np.full((batch, 20), STAY_BIN, dtype=np.int64)


def move_object(pool: ItemPool, index: int, obj: int, bins: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Heads in identity order and an action moving only `obj`."""
    heads = np.arange(10)[None]
    actions = stay_actions()
    actions[0, 2 * obj], actions[0, 2 * obj + 1] = bins
    return heads, actions


class ScriptedPlayer(Player):
    """Answers by a fixed rule of the scene; used to check the reward definitions."""

    needs = frozenset({"scene"})

    def __init__(self, rule):
        self.rule = rule
        self.name = "scripted"
        self.calls = 0

    def answer_batch(self, queries: Sequence[Query]) -> list[Answer]:
        self.calls += 1
        return [Answer(q.item_id, self.rule(q)) for q in queries]


def test_oracle_is_invariant_under_thousands_of_random_moves(real_pool):
    outcomes = play_moves(real_pool, OraclePlayer(), 3000, seed=1)
    summary = summarise(outcomes)
    assert summary.changed == 0 and summary.dropped == 0
    assert 0 < summary.invalid < 3000
    assert all(o.new_answer == o.true_answer for o in outcomes if o.valid)
    assert all(o.reward == pytest.approx(-0.8) for o in outcomes if not o.valid)


def test_oracle_on_generated_items_never_changes(tmp_path):
    from clevr_game.generate import generate_dataset

    generate_dataset(tmp_path, 30, 5, seed=2, progress=False)
    pool = ItemPool(load_items(tmp_path))
    summary = summarise(play_moves(pool, OraclePlayer(), 2000, seed=3))
    assert summary.changed == 0 and summary.dropped == 0 and summary.invalid < 2000


def test_leaving_the_board_is_rejected_with_its_reason(real_pool):
    # The object farthest out along x, put 0.5 inside the edge, then pushed 0.9 further out.
    item = real_pool.items[0]
    edge = int(np.argmax(np.abs(real_pool.xy[0, : len(item.scene), 0])))
    game = Game(real_pool, OraclePlayer())
    outward = 1.0 if real_pool.xy[0, edge, 0] > 0 else -1.0
    xy = real_pool.xy[0].copy()
    real_pool.xy[0, edge, 0] = outward * (BOUND - 0.5)
    try:
        heads, actions = move_object(real_pool, 0, edge, (6 if outward > 0 else 0, STAY_BIN))
        outcome = game.play(np.array([0]), heads, actions)[0]
    finally:
        real_pool.xy[0] = xy
    assert not outcome.valid
    assert f"object {edge} ({item.scene.objects[edge].describe()}) leaves the board" in outcome.reason
    assert outcome.moves == [(edge, pytest.approx(outward * 0.9), 0.0)]
    assert outcome.reward == pytest.approx(-0.8) and outcome.new_answer is None


def test_collision_is_rejected_naming_both_objects(real_items):
    pool = ItemPool(real_items[:1])
    game = Game(pool, OraclePlayer(), moves=MoveSpace("absolute"))
    # Put objects 0 and 1 on the same grid cell.
    actions = stay_actions()
    for obj in (0, 1):
        actions[0, 2 * obj], actions[0, 2 * obj + 1] = 3, 3
    outcome = game.play(np.array([0]), np.arange(10)[None], actions)[0]
    assert not outcome.valid
    assert "object 0 (large brown rubber cylinder) overlaps object 1 (large gray rubber cube)" in outcome.reason


def test_answer_change_is_rejected_with_old_and_new_truth(real_pool):
    # Question 3: "There is a small gray block; are there any spheres to the left of it?" -> yes.
    index = 3
    item = real_pool.items[index]
    assert item.answer == "yes"
    game = Game(real_pool, OraclePlayer(), moves=MoveSpace("absolute"))
    seen = set()
    rng = np.random.default_rng(0)
    for _ in range(400):
        actions = rng.integers(0, 7, (1, 20))
        outcome = game.play(np.array([index]), np.arange(10)[None], actions)[0]
        seen.add(outcome.reason.split(" (")[0] if outcome.reason else "ok")
        if outcome.reason.startswith("answer changed"):
            assert outcome.reason == "answer changed from yes to no"
            assert [v.enforcer for v in outcome.verdicts] == ["boundary", "relevance"]
            break
    else:
        pytest.fail(f"no answer-changing move found; saw {seen}")


def test_stay_move_is_valid_and_answered_from_the_cache(real_pool):
    player = ScriptedPlayer(lambda q: "yes")
    game = Game(real_pool, player)
    outcome = game.play(np.array([0]), np.arange(10)[None], stay_actions())[0]
    assert outcome.valid and not outcome.changed and outcome.reward == pytest.approx(-0.1)
    assert player.calls == 1  # only the old answer was asked


def _position_rule(query: Query) -> str:
    # Flips when object 0 is left of the origin along x: fragile by design.
    return "yes" if query.scene.objects[0].coords[0] > -2.0 else "no"


def test_rewards_follow_the_definitions(real_pool):
    rewards = Rewards(dr=1.0, cr=0.1, fr=-0.1, isr=-0.8)
    always_right = ScriptedPlayer(lambda q: real_pool.items[int(q.item_id.split(":")[1])].answer)
    fragile = ScriptedPlayer(_position_rule)
    rng = np.random.default_rng(4)
    checked = {"dr": 0, "cr": 0, "fr": 0, "isr": 0}
    for player in (always_right, fragile):
        game = Game(real_pool, player, rewards=rewards)
        for _ in range(40):
            indices = rng.integers(0, len(real_pool), 16)
            heads = np.tile(np.arange(10), (16, 1))
            for outcome in game.play(indices, heads, rng.integers(0, 7, (16, 20))):
                if not outcome.valid:
                    expected, key = -0.8, "isr"
                elif outcome.new_answer != outcome.old_answer and outcome.old_answer == outcome.true_answer:
                    expected, key = 1.0, "dr"
                elif outcome.new_answer != outcome.old_answer:
                    expected, key = 0.1, "cr"
                else:
                    expected, key = -0.1, "fr"
                assert outcome.reward == pytest.approx(expected)
                checked[key] += 1
    assert checked["isr"] and checked["fr"] and checked["dr"] + checked["cr"] > 0
    # The always-right player never changes.
    game = Game(real_pool, always_right)
    assert not any(o.changed for o in game.play(np.arange(9), np.tile(np.arange(10), (9, 1)),
                                                rng.integers(0, 7, (9, 20))))


def test_same_seed_same_moves_and_numbers(real_pool):
    def run(seed):
        outcomes = play_moves(real_pool, ScriptedPlayer(_position_rule), 300, seed=seed)
        return [(o.item_id, o.valid, o.reward, o.moves) for o in outcomes]

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_single_env_passes_gymnasium_and_sb3_checkers(real_items):
    from gymnasium.utils.env_checker import check_env as gym_check
    from stable_baselines3.common.env_checker import check_env as sb3_check

    env = AdversarialSceneEnv(real_items, OraclePlayer())
    gym_check(env, skip_render_check=True)
    sb3_check(AdversarialSceneEnv(real_items, OraclePlayer()), warn=True)


def test_registered_id_makes_the_env(real_items):
    env = gym.make(ENV_ID, items=real_items, player=OraclePlayer())
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert terminated and not truncated
    assert set(info) >= {"verdicts", "true_answer", "old_answer", "new_answer", "new_scene", "moves"}


def test_observation_follows_the_head_assignment(real_pool):
    env = AdversarialSceneEnv(real_pool, OraclePlayer())
    obs, info = env.reset(seed=3, options={"item": 0})
    heads = info["heads"]
    scene = real_pool.items[0].scene
    for slot, obj in enumerate(heads):
        if obj < len(scene):
            assert obs["objects"][slot, 2] == 1.0
            right = np.array(scene.directions["right"][:2])
            expected = np.array(scene.objects[obj].coords[:2]) @ right / BOUND
            assert obs["objects"][slot, 0] == pytest.approx(expected, abs=1e-6)
        else:
            assert not obs["objects"][slot].any()
    assert obs["question"][0] > 0


def test_vector_env_matches_single_rules_and_sb3_adapter_trains(real_pool):
    from stable_baselines3 import A2C

    vec = AdversarialVectorEnv(real_pool, OraclePlayer(), num_envs=8)
    obs, _ = vec.reset(seed=0)
    assert obs["objects"].shape == (8, 10, 7)
    _, rewards, done, _, infos = vec.step(vec.action_space.sample())
    assert done.all() and rewards.shape == (8,)
    assert len(infos["final_info"]["outcome"]) == 8
    model = A2C("MultiInputPolicy", Sb3VecEnv(vec), n_steps=4, seed=0, device="cpu")
    before = _parameters(model.policy)
    losses = _record_losses(model)
    model.learn(64, log_interval=1)
    assert model.num_timesteps == 64
    assert _heads_moved(before, model.policy) == {"action_net", "value_net"}
    assert np.isfinite(losses["train/policy_loss"]) and np.isfinite(losses["train/value_loss"])


def test_ppo_trains_unchanged_on_the_single_env(real_items):
    from stable_baselines3 import PPO

    env = AdversarialSceneEnv(real_items, OraclePlayer())
    model = PPO("MultiInputPolicy", env, n_steps=32, batch_size=16, n_epochs=1, seed=0, device="cpu")
    before = _parameters(model.policy)
    losses = _record_losses(model)
    model.learn(64)
    assert model.num_timesteps == 64
    assert _heads_moved(before, model.policy) == {"action_net", "value_net"}
    assert np.isfinite(losses["train/policy_gradient_loss"]) and np.isfinite(losses["train/value_loss"])


def _parameters(policy) -> dict[str, np.ndarray]:
    return {name: p.detach().cpu().numpy().copy() for name, p in policy.named_parameters()}


def _heads_moved(before: dict[str, np.ndarray], policy) -> set[str]:
    """Which of the action and value heads the updates changed."""
    after = _parameters(policy)
    moved = {name.split(".")[0] for name, value in before.items() if not np.array_equal(value, after[name])}
    return moved & {"action_net", "value_net"}


def _record_losses(model) -> dict[str, float]:
    """Route the model's log into a dict (an SB3 output format), so the test can read what training logged."""
    from stable_baselines3.common.logger import KVWriter, Logger

    logged: dict[str, float] = {}

    class Remember(KVWriter):
        def write(self, key_values, key_excluded, step=0):
            logged.update({k: v for k, v in key_values.items() if isinstance(v, (int, float))})

        def close(self):
            return None

    model.set_logger(Logger(None, [Remember()]))
    return logged


def test_minigames_are_disjoint_saved_and_reloaded(tmp_path, real_items):
    ids = [it.item_id for it in real_items]
    games = split_minigames(ids, 3, seed=5)
    assert len(games) == 3
    flat = [i for g in games.games for i in g]
    assert len(flat) == len(set(flat)) == 9
    path = tmp_path / "minigames.json"
    games.save(path)
    again = MiniGames.load(path)
    assert again.games == games.games
    assert split_minigames(ids, 3, seed=5).games == games.games
    assert split_minigames(ids, 3, seed=6).games != games.games
    assert [real_items[i].item_id for i in again.indices(ids, 1)] == games.games[1]
    with pytest.raises(Exception, match="fingerprint"):
        again.indices(ids[::-1], 0)


def test_play_command_prints_the_metrics_line(tmp_path, clevr_real, capsys):
    from clevr_game.cli import main

    shutil.copy(clevr_real / "CLEVR_val_scenes_sample11.json", tmp_path / "scenes.json")
    shutil.copy(clevr_real / "CLEVR_val_questions_sample9.json", tmp_path / "questions.json")
    assert main(["play", "--items", str(tmp_path), "--player", "oracle", "--moves", "random",
                 "--episodes", "200"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("consistency: 0.0000 drop: 0.0000 invalid: ")
    invalid = float(last.split("invalid: ")[1].split()[0])
    assert last.endswith(" accuracy: 1.0000")
    assert 0.0 < invalid < 1.0  # random moves of real scenes: some break the layout, some do not


def _single_object_moves(objects: int) -> np.ndarray:
    moves = []
    for obj in range(objects):
        for bx in range(7):
            for by in range(7):
                action = np.full(20, STAY_BIN)
                action[2 * obj], action[2 * obj + 1] = bx, by
                moves.append(action)
    return np.array(moves)


def test_clevr_poc_items_are_refereed_by_their_environment(tmp_path):
    from clevr_game.asp import Environment, brave_answers
    from clevr_game.asp.dataset import generate_poc_dataset
    from envs.poc_items import PocRules, poc_items

    generate_poc_dataset(tmp_path, 2, 6, seed=0)
    items = poc_items(tmp_path)
    pool = ItemPool(items)
    player = ScriptedPlayer(lambda q: "metal")
    game = Game(pool, player)
    rules = game.referee.asp.rules
    assert isinstance(rules, PocRules)
    verdict_kinds = set()
    for index, item in enumerate(items):
        environment = Environment.load(item.extra["environment_file"])
        moves = _single_object_moves(len(item.scene))
        outcomes = game.play(np.full(len(moves), index), np.tile(np.arange(10), (len(moves), 1)), moves)
        for outcome in outcomes:
            verdict_kinds.add((outcome.valid, outcome.verdicts[-1].enforcer))
            if not outcome.valid and outcome.verdicts[-1].enforcer == "asp":
                result = environment.check(rules.complete_scene(item, _moved(item, outcome)))
                assert not result.ok and outcome.reason == result.failed[0]
        valid = [o for o in outcomes if o.valid and o.moves][:3]
        for outcome in valid:
            recomputed = brave_answers(environment, outcome.new_scene, item.extra["asp"])
            assert ",".join(recomputed) == item.answer
    assert (True, "relevance") in verdict_kinds and (False, "asp") in verdict_kinds


def _moved(item, outcome):
    coords = item.scene.coords()
    for obj, dx, dy in outcome.moves:
        coords[obj, :2] += (dx, dy)
    return item.scene.with_coords(coords)


def test_rgb_array_render_and_pixel_players_get_rendered_images(real_items, tmp_path):
    from clevr_game.render import Renderer, read_png

    seen = []

    class ImagePlayer(Player):
        needs = frozenset({"image"})
        name = "image-reader"

        def answer_batch(self, queries):
            seen.extend(q.image_path for q in queries)
            assert all(q.scene is None and q.program is None for q in queries)
            return [Answer(q.item_id, "yes") for q in queries]

    with Renderer("fast", width=64, height=48, cache_dir=tmp_path / "cache") as renderer:
        env = AdversarialSceneEnv(real_items[:2], ImagePlayer(), render_mode="rgb_array", renderer=renderer)
        env.reset(seed=0, options={"item": 0})
        frame = env.render()
        assert frame.shape == (48, 64, 3) and frame.dtype == np.uint8 and frame.std() > 1
        env.step(np.full(20, STAY_BIN))
        assert seen and all(read_png(path).shape == (48, 64, 3) for path in seen)
