"""The adversary: distribution, SB3 policy, learning against a fragile player, exact resume, baselines."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pytest
import torch
from stable_baselines3.common.distributions import MultiCategoricalDistribution

from agents.a2c import A2CConfig, A2CTrainer, policy_actions
from agents.distribution import BatchedMultiCategorical, mask_empty_heads
from agents.evaluation import evaluate, random_actions, scores
from agents.features import FeatureCache, RelationalFeatures
from agents.policy import AdversaryPolicy
from agents.pretrained import word_map
from agents.sb3_vec_env import Sb3VecEnv
from agents.search import SearchAdversary
from clevr_game.generate import generate_dataset
from clevr_game.programs import execute_scene
from clevr_game.text import default_word_vocabulary
from envs.game import Game
from envs.items import ItemPool, load_items
from envs.moves import STAY_BIN
from envs.vector import AdversarialVectorEnv
from players.oracle import OraclePlayer
from players.protocol import Answer, Player, Query
from players.state.checkpoint import player_file_from, save_player_file
from players.state.features import ANSWERS
from players.state.models import build_model

TINY_RN = {"width": 32, "word_width": 16, "question_width": 32, "g_layers": 2, "f_width": 32, "dropout": 0.0}


class FragilePlayer(Player):
    """Right on every scene, except when object 0 has moved left of where it first saw it."""

    needs = frozenset({"scene", "program"})
    name = "fragile"

    def __init__(self, threshold: float = 0.25):
        self.threshold = threshold
        self.first_seen: dict[str, np.ndarray] = {}

    def answer_batch(self, queries: Sequence[Query]) -> list[Answer]:
        answers = []
        for q in queries:
            right = execute_scene(q.program, q.scene)
            xy = np.array(q.scene.objects[0].coords[:2])
            start = self.first_seen.setdefault(q.item_id, xy)
            leftward = (xy - start) @ np.array(q.scene.directions["left"][:2])
            wrong = "no" if right == "yes" else "yes"
            answers.append(Answer(q.item_id, wrong if leftward > self.threshold else right))
        return answers


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    folder = tmp_path_factory.mktemp("items")
    generate_dataset(folder, 40, 3, seed=11, min_objects=3, max_objects=5, progress=False)
    return ItemPool(load_items(folder))


@pytest.fixture(scope="module")
def network():
    torch.manual_seed(0)
    words = default_word_vocabulary()
    return build_model("relation-network", TINY_RN, len(words), len(ANSWERS)).eval()


@pytest.fixture(scope="module")
def attack_inputs(tmp_path_factory, network):
    """An adversary relation-network file and a 24-item dataset folder, for `clevr-game attack`."""
    root = tmp_path_factory.mktemp("attack_inputs")
    words = default_word_vocabulary()
    save_player_file(root / "rn.pt", player_file_from(network, "relation-network", words, list(ANSWERS), {}))
    generate_dataset(root / "items", 12, 2, seed=4, progress=False)
    return root / "rn.pt", root / "items"


@pytest.fixture(scope="module")
def words_map():
    words = default_word_vocabulary()
    return word_map(words, words)


def test_batched_distribution_equals_twenty_independent_categoricals():
    torch.manual_seed(1)
    logits = torch.randn(6, 140)
    ours = BatchedMultiCategorical().proba_distribution(logits)
    sb3 = MultiCategoricalDistribution([7] * 20).proba_distribution(logits)
    actions = ours.sample()
    assert actions.shape == (6, 20)
    torch.testing.assert_close(ours.log_prob(actions), sb3.log_prob(actions))
    torch.testing.assert_close(ours.entropy(), sb3.entropy())
    torch.testing.assert_close(ours.mode(), sb3.mode())


def test_heads_are_sampled_independently():
    # Two heads with opposite preferences: samples of one must not follow the other.
    logits = torch.zeros(4000, 20, 7)
    logits[:, 0, 0] = 2.0
    logits[:, 2, 6] = 2.0
    samples = BatchedMultiCategorical().proba_distribution(logits.flatten(1)).sample()
    first, third = samples[:, 0].numpy(), samples[:, 2].numpy()
    assert abs(np.corrcoef(first, third)[0, 1]) < 0.05
    expected = np.exp(2) / (np.exp(2) + 6)
    assert abs((first == 0).mean() - expected) < 0.03 and abs((third == 6).mean() - expected) < 0.03


def test_empty_heads_always_stay_and_cost_nothing():
    logits = torch.randn(5, 10, 2, 7)
    present = torch.zeros(5, 10)
    present[:, :3] = 1
    dist = BatchedMultiCategorical().proba_distribution(mask_empty_heads(logits, present).flatten(1))
    samples = dist.sample().reshape(5, 10, 2)
    assert (samples[:, 3:] == STAY_BIN).all()
    assert (samples[:, :3] != STAY_BIN).any()
    masked_only = BatchedMultiCategorical().proba_distribution(
        mask_empty_heads(logits, torch.zeros(5, 10)).flatten(1))
    assert torch.allclose(masked_only.entropy(), torch.zeros(5), atol=1e-5)


def test_sb3_a2c_trains_with_the_adversary_policy(pool, network, words_map):
    from stable_baselines3 import A2C

    env = Sb3VecEnv(AdversarialVectorEnv(pool, OraclePlayer(), num_envs=8))
    model = A2C(AdversaryPolicy, env, n_steps=1, seed=0, device="cpu", policy_kwargs={
        "features_extractor_class": RelationalFeatures,
        "features_extractor_kwargs": {"network": network, "word_map": words_map, "freeze": True},
    })
    before = [p.detach().clone() for p in model.policy.mlp_extractor.parameters()]
    model.learn(64)
    after = list(model.policy.mlp_extractor.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert all(not p.requires_grad for p in model.policy.features_extractor.network.parameters())


def _fragile_setup(pool, network, words_map, items=4):
    sub = pool.subset(list(range(items)))
    return sub, FeatureCache(network, words_map, sub)


def test_adversary_learns_the_fragile_move_far_more_often_than_random(pool, network, words_map):
    sub, cache = _fragile_setup(pool, network, words_map)
    player = FragilePlayer()
    env = AdversarialVectorEnv(sub, player, num_envs=64)
    trainer = A2CTrainer(env, cache, A2CConfig(steps=64 * 120, num_envs=64, seed=0))
    trainer.train()
    game = env.game
    items = list(range(len(sub)))
    trained = evaluate(game, items, policy_actions(trainer.adversary, cache), 64, seed=5)
    random = evaluate(game, items, random_actions(6), 64, seed=5)

    def success_rate(results):
        # Per sample: how often a single move flips the answer.
        return np.mean([r.changed for r in results]), sum(r.valid for r in results) / sum(r.tries for r in results)

    trained_scores, random_scores = scores(trained), scores(random)
    assert trained_scores.consistency >= random_scores.consistency
    flips_trained = _sample_flip_rate(game, items, policy_actions(trainer.adversary, cache))
    flips_random = _sample_flip_rate(game, items, random_actions(7))
    assert flips_trained > 0.3
    assert flips_trained > 3 * flips_random
    assert success_rate(trained)[1] > success_rate(random)[1]


def _sample_flip_rate(game: Game, items: list[int], actions_for) -> float:
    rng = np.random.default_rng(3)
    indices = np.repeat(items, 64)
    heads = rng.permuted(np.tile(np.arange(10), (len(indices), 1)), axis=1)
    outcomes = game.play(indices, heads, actions_for(indices, heads))
    return float(np.mean([o.changed for o in outcomes]))


def test_resume_gives_the_same_result_as_an_uninterrupted_run(pool, network, words_map, tmp_path):
    sub, cache = _fragile_setup(pool, network, words_map)
    config = A2CConfig(steps=32 * 12, num_envs=32, checkpoint_every=6, seed=3)

    straight = A2CTrainer(AdversarialVectorEnv(sub, FragilePlayer(), 32), cache, config,
                          checkpoint=tmp_path / "straight.pt")
    straight.train()

    first = A2CTrainer(AdversarialVectorEnv(sub, FragilePlayer(), 32), cache, config,
                       checkpoint=tmp_path / "resumed.pt")
    for _ in range(6):
        first.step()
    first.save()
    del first  # the process "dies" here
    resumed = A2CTrainer(AdversarialVectorEnv(sub, FragilePlayer(), 32), cache, config,
                         checkpoint=tmp_path / "resumed.pt")
    assert resumed.update == 6
    resumed.train()
    assert straight.history == resumed.history
    for name, tensor in straight.adversary.state_dict().items():
        torch.testing.assert_close(tensor, resumed.adversary.state_dict()[name])


def test_search_adversary_finds_the_fragile_flip_and_certifies_the_oracle(tmp_path):
    generate_dataset(tmp_path, 6, 2, seed=2, min_objects=2, max_objects=2, progress=False)
    pool = ItemPool(load_items(tmp_path))
    fragile = SearchAdversary(Game(pool, FragilePlayer()), budget=200, strategy="greedy")
    found = fragile.attack(0)
    assert found.flipped is not None and found.queries <= 200
    assert any(obj == 0 for obj, _, _ in found.flipped.moves)
    oracle = SearchAdversary(Game(pool, OraclePlayer()), budget=3000, strategy="exhaustive", batch=256)
    certificate = oracle.attack(0)
    assert certificate.flipped is None and certificate.certified_robust
    assert certificate.candidates == 7 ** 4 - 1


def test_attack_command_against_the_oracle(attack_inputs, tmp_path, capsys):
    from clevr_game.cli import main

    weights, items = attack_inputs
    run = tmp_path / "run"
    assert main(["attack", "--player", "oracle", "--items", str(items), "--minigame-size", "10",
                 "--minigame", "0", "--seed", "1", "--steps", "512", "--num-envs", "64",
                 "--adversary-weights", str(weights), "--out", str(run), "--no-progress"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == "consistency: 0.0000 drop: 0.0000 accuracy: 1.0000"
    result = json.loads((run / "result.json").read_text())
    assert result["random_consistency"] == 0.0 and result["random_drop"] == 0.0
    assert len(result["items"]) == 10 and (run / "learning_curve.png").stat().st_size > 0
    assert (run / "minigames.json").is_file() and (run / "checkpoint.pt").is_file()


def test_entropy_coefficient_moves_toward_its_target(pool, network, words_map):
    sub, cache = _fragile_setup(pool, network, words_map)
    coefficients = {}
    for target in (0.01, 1.9):
        env = AdversarialVectorEnv(sub, FragilePlayer(), num_envs=32)
        trainer = A2CTrainer(env, cache, A2CConfig(steps=32 * 30, num_envs=32, seed=0, target_entropy=target))
        start = trainer.log_entropy_coef.item()
        trainer.train()
        coefficients[target] = trainer.log_entropy_coef.item() - start
    assert coefficients[0.01] < -0.1  # more entropy than asked for: the bonus shrinks
    assert coefficients[1.9] > 0.1  # less than asked for (ln 7 = 1.95 is uniform): the bonus grows


def test_self_imitation_replays_a_stored_success(pool, network, words_map):
    sub, cache = _fragile_setup(pool, network, words_map)
    heads = np.arange(10)[None, :]
    move = np.full((1, 20), STAY_BIN)
    move[0, 0] = 0  # head 0 one bin left on x: a move the oracle never rewards

    def log_prob_after(self_imitation_coef: float) -> float:
        env = AdversarialVectorEnv(sub, OraclePlayer(), num_envs=32)
        config = A2CConfig(steps=32 * 25, num_envs=32, seed=0, self_imitation_coef=self_imitation_coef)
        trainer = A2CTrainer(env, cache, config)
        trainer.replay.add(np.array([0]), heads, move, np.array([1.0]))
        trainer.train()
        with torch.no_grad():
            logits, _ = trainer.adversary(*cache.lookup(np.array([0]), heads))
        dist = BatchedMultiCategorical().proba_distribution(logits.flatten(1))
        return float(dist.log_prob(torch.as_tensor(move)))

    assert log_prob_after(1.0) > log_prob_after(0.0) + 1.0


def test_success_replay_keeps_the_newest_within_capacity():
    from agents.a2c import SuccessReplay

    replay = SuccessReplay(capacity=3)
    for k in range(5):
        replay.add(np.array([k]), np.zeros((1, 10), dtype=np.int64), np.full((1, 20), k), np.array([1.0]))
    assert list(replay.items) == [2, 3, 4] and len(replay) == 3
    copy = SuccessReplay(capacity=3)
    copy.load(replay.state())
    items, _, actions, _ = copy.sample(8, torch.Generator().manual_seed(0))
    assert set(items) <= {2, 3, 4} and all(int(a[0]) == i for a, i in zip(actions, items, strict=True))


def test_attack_options_reach_the_trainer(attack_inputs, tmp_path, capsys):
    from clevr_game.cli import main

    weights, items = attack_inputs
    run = tmp_path / "run"
    assert main(["attack", "--player", "oracle", "--items", str(items), "--steps", "256", "--num-envs", "64",
                 "--stay-bias", "3.0", "--target-entropy", "-1", "--entropy-coef", "0.02",
                 "--rewards", "1", "0.1", "-0.1", "-0.5", "--adversary-weights", str(weights),
                 "--out", str(run), "--no-progress"]) == 0
    options = json.loads((run / "result.json").read_text())["options"]
    assert options["stay_bias"] == 3.0 and options["target_entropy"] is None
    assert options["rewards"] == [1.0, 0.1, -0.1, -0.5]
    checkpoint = torch.load(run / "checkpoint.pt", weights_only=False)
    assert checkpoint["config"]["target_entropy"] is None and checkpoint["config"]["stay_bias"] == 3.0
    torch.testing.assert_close(checkpoint["log_entropy_coef"].exp(), torch.tensor(0.02))  # held fixed
    history = checkpoint["history"]
    # The oracle never changes its answer: each update's mean reward is fr on valid scenes, isr on the rest.
    expected = [-0.1 * (1.0 - share) - 0.5 * share for share in history["invalid"]]
    np.testing.assert_allclose(history["reward"], expected, atol=1e-6)
    assert max(history["invalid"]) > 0.0
    with pytest.raises(SystemExit) as stopped:  # the parser refuses it before any work
        main(["attack", "--player", "oracle", "--items", str(items), "--threads", "0",
              "--out", str(tmp_path / "bad"), "--no-progress"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "argument --threads: must be an integer in 1..256, got '0'")
