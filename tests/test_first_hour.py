"""A researcher's first hour: gym.make with no arguments, arguments as users write them,
exact moves, the shipped sample, clean output paths and file modes."""

from __future__ import annotations

import os
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from clevr_game.cli import build_parser, main
from clevr_game.errors import InputError
from envs import ENV_ID
from envs.defaults import DEFAULT_ITEMS, DEFAULT_PLAYER
from envs.items import ItemPool, load_items
from envs.moves import STAY_BIN
from envs.two_player import ADVERSARY, VQA_PLAYER, TwoPlayerEnv
from envs.vector import AdversarialVectorEnv
from players.oracle import OraclePlayer

torch.set_num_threads(1)  # one thread is several times faster than two on a busy 2-core machine

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "clevr_game" / "data" / "sample"
STAY = np.full(20, STAY_BIN)
INFO_KEYS = {"item_id", "valid", "reason", "verdicts", "true_answer", "old_answer", "new_answer",
             "changed", "dropped", "moves", "new_scene", "player_error"}


# ------------------------------------------------------------------ gym.make


def test_make_with_no_arguments_plays_the_shipped_sample_against_the_state_transformer():
    env = gym.make(ENV_ID)
    try:
        assert DEFAULT_ITEMS == SAMPLE
        assert len(env.unwrapped.pool) == 60
        assert env.unwrapped.game.player.name == DEFAULT_PLAYER
        obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs)
        obs, reward, terminated, truncated, info = env.step(STAY)
        assert terminated and not truncated
        assert set(info) == INFO_KEYS
        assert info["valid"] and info["moves"] == [] and reward == pytest.approx(-0.1)
        assert info["old_answer"] == info["new_answer"]
    finally:
        env.close()


@pytest.mark.parametrize("items", [str(SAMPLE), SAMPLE, "list", "pool"])
def test_make_takes_a_folder_a_list_or_a_pool_and_a_player_spec(items):
    if items in ("list", "pool"):
        items = load_items(SAMPLE) if items == "list" else ItemPool(load_items(SAMPLE))
    env = gym.make(ENV_ID, items=items, player="oracle")
    env.reset(seed=1)
    _, reward, _, _, info = env.step(STAY)
    assert isinstance(env.unwrapped.game.player, OraclePlayer)
    assert info["valid"] and info["new_answer"] == info["true_answer"]
    env.close()


@pytest.mark.parametrize(("kwargs", "start"), [
    ({"items": "no/such/folder"}, "items='no/such/folder': no/such/folder: not an item folder"),
    ({"items": 42}, "items=42: expected an item folder (str or Path), a list of envs.items.Item or an ItemPool"),
    ({"items": [1, 2]}, "items=[1, 2]: a list of items holds int 1"),
    ({"items": []}, "items=[]: no items to play"),
    ({"player": "nobody"}, "player='nobody': unknown player 'nobody'"),
    ({"player": "subprocess:"}, "player='subprocess:': "),
    ({"player": "file:no/such.pt"}, "player='file:no/such.pt': "),
    ({"player": 3.5}, "player=3.5: expected a Player or a player spec string"),
])
def test_bad_items_or_player_is_one_line_naming_the_argument(kwargs, start):
    with pytest.raises(InputError) as caught:
        gym.make(ENV_ID, **{"player": "oracle", **kwargs})
    message = str(caught.value)
    assert message.startswith(start) and "\n" not in message


def test_ppo_learns_on_the_default_env():
    from stable_baselines3 import PPO

    env = gym.make(ENV_ID)
    model = PPO("MultiInputPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0)
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(64)
    assert model.num_timesteps == 64
    assert any(not torch.equal(a, b) for a, b in zip(before, model.policy.parameters(), strict=True))
    env.close()


def test_make_vec_gives_the_native_batched_env():
    venv = gym.make_vec(ENV_ID, num_envs=8, items=str(SAMPLE), player="oracle")
    assert isinstance(venv, AdversarialVectorEnv) and venv.num_envs == 8
    venv.reset(seed=0)
    _, rewards, done, _, infos = venv.step(np.tile(STAY, (8, 1)))
    assert done.all() and rewards == pytest.approx([-0.1] * 8)
    assert all(o.valid for o in infos["final_info"]["outcome"])
    venv.close()
    with pytest.raises(InputError, match=r"^player='nobody': "):
        gym.make_vec(ENV_ID, num_envs=2, player="nobody")


def test_vector_env_with_no_arguments_uses_the_defaults_and_closes_its_own_player():
    venv = AdversarialVectorEnv(num_envs=4)
    assert len(venv.pool) == 60 and venv.game.player.name == DEFAULT_PLAYER
    closed = []
    venv.game.player.close = lambda: closed.append(True)
    venv.close()
    assert closed == [True]

    player = OraclePlayer()
    player.close = lambda: closed.append("caller's")
    AdversarialVectorEnv(SAMPLE, player, num_envs=2).close()
    assert closed == [True]  # a player passed in belongs to the caller


@pytest.mark.parametrize("items", [None, str(SAMPLE)])
def test_two_player_env_takes_a_folder_or_nothing(items):
    env = TwoPlayerEnv(items, seed=0)
    env.reset(options={"item": 0})
    env.step(STAY)
    assert env.agent_selection == VQA_PLAYER
    env.step(0)
    assert env.terminations[ADVERSARY] and len(env.pool) == 60
    with pytest.raises(InputError, match=r"^items='nowhere': "):
        TwoPlayerEnv("nowhere")


# ------------------------------------------------------------------ exact moves


def test_moves_are_exact_multiples_of_the_step():
    venv = AdversarialVectorEnv(ItemPool(load_items(SAMPLE)), OraclePlayer(), num_envs=64)
    venv.reset(seed=0)
    venv.action_space.seed(0)
    values = []
    for _ in range(4):
        _, _, _, _, infos = venv.step(venv.action_space.sample())
        values += [v for o in infos["final_info"]["outcome"] for _, dx, dy in o.info()["moves"] for v in (dx, dy)]
    assert len(values) > 500 and any(v != 0 for v in values)
    for v in values:
        assert v == round(v, 10), v
        assert abs(v / 0.3 - round(v / 0.3)) < 1e-9 and abs(v) <= 0.9 + 1e-12, v


# ------------------------------------------------------------------ the shipped sample


def test_answer_example_runs_on_the_shipped_sample(monkeypatch, capsys):
    monkeypatch.chdir(REPO)  # the README's command, as written, from the repository root
    assert main(["answer", "--scenes", "clevr_game/data/sample/scenes.json",
                 "--questions", "clevr_game/data/sample/questions.json"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "accuracy: 60/60"


def test_shipped_sample_is_what_its_readme_command_makes(tmp_path, capsys):
    assert "--num-scenes 20 --questions-per-scene 3 --seed 0" in (SAMPLE / "README.md").read_text()
    main(["generate", "--num-scenes", "20", "--questions-per-scene", "3", "--seed", "0",
          "--out", str(tmp_path), "--no-progress"])
    for name in ("scenes.json", "questions.json"):
        assert (tmp_path / name).read_bytes() == (SAMPLE / name).read_bytes(), name


# ------------------------------------------------------------------ the command line


def test_play_help_explains_every_option():
    play = build_parser()._subparsers._group_actions[0].choices["play"]
    unexplained = [a.option_strings[0] for a in play._actions if a.option_strings and not a.help]
    assert unexplained == []


def test_output_paths_are_printed_clean_and_files_follow_the_umask(tmp_path, capsys):
    out = f"{tmp_path}/data/"
    old = os.umask(0o027)
    try:
        assert main(["generate", "--num-scenes", "2", "--questions-per-scene", "1", "--out", out,
                     "--no-progress"]) == 0
    finally:
        os.umask(old)
    printed = capsys.readouterr().out
    assert f"wrote {tmp_path}/data/scenes.json and {tmp_path}/data/questions.json" in printed
    assert "//" not in printed
    for name in ("scenes.json", "questions.json"):
        assert (tmp_path / "data" / name).stat().st_mode & 0o777 == 0o640


def test_poc_generate_prints_clean_paths(tmp_path, capsys):
    assert main(["poc", "generate", "--environments", "1", "--items", "2", "--seed", "11",
                 "--out", f"{tmp_path}/poc/"]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {tmp_path}/poc/environments and " in printed and "//" not in printed


@pytest.mark.parametrize("writer", ["render cache copy", "image stack", "player file"])
def test_other_atomic_writers_follow_the_umask(tmp_path, writer):
    target = tmp_path / "out" / "file"
    target.parent.mkdir()
    old = os.umask(0o022)
    try:
        if writer == "render cache copy":
            from clevr_game.render.cache import copy_atomic

            (tmp_path / "source.png").write_bytes(b"png")
            copy_atomic(tmp_path / "source.png", target)
        elif writer == "image stack":
            from players.pixel.images import _save_npy_atomic

            _save_npy_atomic(target, np.zeros(3))
        else:
            from players.state.checkpoint import write_torch_atomic

            os.umask(0o077)  # a private umask wins over "a player file is meant to be shared"
            write_torch_atomic(target, {"x": 1})
    finally:
        expected = 0o666 & ~os.umask(old)
    assert target.stat().st_mode & 0o777 == expected
