"""The pixel-input adversary: features from the original image, heads told only where their object is."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_agents import FragilePlayer, _sample_flip_rate  # noqa: I001

from agents.a2c import A2CConfig, A2CTrainer, policy_actions
from agents.evaluation import random_actions
from agents.pixel_features import PixelFeatureCache, image_positions, render_originals
from clevr_game.generate import generate_dataset
from clevr_game.text import default_word_vocabulary
from envs.items import ItemPool, load_items
from envs.vector import AdversarialVectorEnv
from players.pixel.images import ImageSpec
from players.pixel.models import PixelRelationNetwork, PixelRNConfig
from players.protocol import Answer, Player

SPEC = ImageSpec("fast", 64, 48)


class LeftwardPlayer(Player):
    """Answers "yes", except "no" once the object whose position the head was told has moved left.

    Which object moved is read from the scene only to plant the flip; the adversary
    itself sees the image and its objects' positions.
    """

    needs = frozenset({"scene"})
    name = "leftward"

    def __init__(self):
        self.first_seen: dict[str, np.ndarray] = {}

    def answer_batch(self, queries):
        answers = []
        for q in queries:
            xy = np.array([o.coords[:2] for o in q.scene.objects])
            start = self.first_seen.setdefault(q.item_id, xy)
            leftward = (xy - start) @ np.array(q.scene.directions["left"][:2])
            answers.append(Answer(q.item_id, "no" if leftward.max() > 0.25 else "yes"))
        return answers


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pixel-adversary")
    generate_dataset(folder, 4, 1, seed=11, min_objects=3, max_objects=5, progress=False)
    pool = ItemPool(load_items(str(folder)))
    torch.manual_seed(0)
    words = default_word_vocabulary()
    network = PixelRelationNetwork(PixelRNConfig(channels=8, conv_layers=3, g_width=32, g_layers=2, f_width=32),
                                   len(words.words), 32)
    word_map = np.arange(len(pool.words.words))  # the pool's words are the default vocabulary
    images = render_originals(pool, SPEC)
    return pool, network, word_map, images


def test_features_are_fixed_per_item_and_heads_see_only_their_objects_position(setup):
    pool, network, word_map, images = setup
    assert images.shape == (len(pool), SPEC.height, SPEC.width, 3) and images.std() > 5
    first = PixelFeatureCache(network, word_map, pool, images)
    second = PixelFeatureCache(network, word_map, pool, images.copy())
    assert torch.equal(first.globals, second.globals) and torch.equal(first.objects, second.objects)
    assert first.objects.shape == (len(pool), 10, 8 + 2)
    positions = image_positions(pool)
    torch.testing.assert_close(first.objects[..., -2:], torch.as_tensor(positions, dtype=torch.float32))
    assert (np.abs(positions[pool.present]) <= 1.0).all()
    assert torch.count_nonzero(first.objects[~torch.as_tensor(pool.present)]) == 0
    heads = np.tile(np.arange(10)[::-1], (2, 1))
    g, slots, present = first.lookup(np.array([0, 1]), heads)
    assert torch.equal(slots[0, -1], first.objects[0, 0]) and present[0, -1] == 1.0
    # Another image changes what the adversary sees; the same image never does.
    brighter = np.clip(images.astype(np.int16) + 40, 0, 255).astype(np.uint8)
    assert not torch.equal(PixelFeatureCache(network, word_map, pool, brighter).globals, first.globals)


def test_pixel_adversary_learns_a_planted_flip_far_more_often_than_random(setup):
    pool, network, word_map, images = setup
    cache = PixelFeatureCache(network, word_map, pool, images)
    env = AdversarialVectorEnv(pool, LeftwardPlayer(), num_envs=64)
    trainer = A2CTrainer(env, cache, A2CConfig(steps=64 * 120, num_envs=64, seed=0))
    items = list(range(len(pool)))
    untrained = _sample_flip_rate(env.game, items, policy_actions(trainer.adversary, cache))
    trainer.train()
    trained = _sample_flip_rate(env.game, items, policy_actions(trainer.adversary, cache))
    random = _sample_flip_rate(env.game, items, random_actions(7))
    assert trained > 2 * untrained and trained > 3 * random, (untrained, trained, random)


def test_pixel_adversary_resumes_exactly(setup, tmp_path):
    pool, network, word_map, images = setup
    cache = PixelFeatureCache(network, word_map, pool, images)
    config = A2CConfig(steps=32 * 8, num_envs=32, checkpoint_every=4, seed=3)
    straight = A2CTrainer(AdversarialVectorEnv(pool, FragilePlayer(), 32), cache, config,
                          checkpoint=tmp_path / "straight.pt")
    straight.train()
    first = A2CTrainer(AdversarialVectorEnv(pool, FragilePlayer(), 32), cache, config,
                       checkpoint=tmp_path / "resumed.pt")
    for _ in range(4):
        first.step()
    first.save()
    resumed = A2CTrainer(AdversarialVectorEnv(pool, FragilePlayer(), 32), cache, config,
                         checkpoint=tmp_path / "resumed.pt")
    resumed.train()
    assert straight.history == resumed.history


def test_benchmark_plans_one_trial_per_adversary_input_with_the_search_once(tmp_path):
    from benchmarks.trials import Plan

    plan = Plan(players=["oracle"], items="unused", sizes=[10], minigames=1, seeds=2, steps=128, out=str(tmp_path),
                adversaries=("state", "pixel"))
    trials = plan.trials()
    assert sorted(t["adversary"] for t in trials) == ["pixel", "pixel", "state", "state"]
    assert len({t["trial"] for t in trials}) == 4
    assert all(t["trial"].split("__")[1] == "pixel" for t in trials if t["adversary"] == "pixel")
    assert [t["adversary"] for t in trials if t["search_budget"]] == ["state"]


def test_unknown_adversary_inputs_are_refused_in_one_line(tmp_path, capsys):
    from clevr_game.cli import main

    rc = main(["benchmark", "--players", "oracle", "--adversaries", "state,eyes", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "--adversaries 'state,eyes'" in err and "\n" not in err


def test_the_shipped_pixel_adversary_network_loads_and_reads_images(setup):
    from agents.pixel_features import load_pixel_adversary_network

    pool, _, _, _ = setup
    network, word_map, spec = load_pixel_adversary_network(None, pool.words)
    assert (spec.preset, spec.width, spec.height) == ("fast", 128, 96)
    assert word_map.shape == (len(pool.words.words),) and (word_map[2:] > 1).mean() > 0.9
    images = render_originals(pool, spec)
    cache = PixelFeatureCache(network, word_map, pool, images)
    assert torch.isfinite(cache.globals).all() and cache.globals.std() > 0
