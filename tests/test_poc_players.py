"""CLEVR-POC players and `poc eval`: set scores, the oracle's 1.0, parsers and perception that learn.

Answers are re-checked with the independent clingo encoding of
tests/test_asp_oracle.py wherever a test says "fresh clingo".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from test_asp_oracle import oracle_answers, oracle_satisfied

from clevr_game.asp.metrics import exact_accuracy, jaccard, mean_jaccard
from clevr_game.asp.questions import program_rule
from clevr_game.asp.regions import regions_of
from clevr_game.cli import main
from envs.items import load_items
from players.protocol import Answer, Player


@pytest.fixture(scope="module")
def poc_folder(tmp_path_factory: pytest.TempPathFactory):
    from clevr_game.asp.dataset import generate_poc_dataset

    folder = tmp_path_factory.mktemp("poc")
    generate_poc_dataset(folder, 2, 24, seed=5)
    return folder


@pytest.fixture(scope="module")
def items(poc_folder):
    return load_items(poc_folder)


# ---------------------------------------------------------------- scores and poc eval


def test_exact_and_jaccard_on_hand_made_sets():
    true = [["blue", "red"], ["cube"], ["large", "small"], ["metal"]]
    predicted = [["red", "blue"], ["cube", "cone"], ["medium"], ["metal"]]
    assert jaccard(["red", "blue"], ["blue", "red"]) == 1.0
    assert jaccard(["cube", "cone"], ["cube"]) == 0.5
    assert jaccard(["medium"], ["large", "small"]) == 0.0
    assert exact_accuracy(predicted, true) == 0.5
    assert mean_jaccard(predicted, true) == pytest.approx((1 + 0.5 + 0 + 1) / 4)


class SetPlayer(Player):
    """Answers each item from a table (item id -> set text, or None for an error answer)."""

    name = "table"
    needs = frozenset({"scene"})

    def __init__(self, table: dict[str, str | None]):
        self.table = table

    def answer_batch(self, queries):
        return [Answer(q.item_id, self.table[q.item_id]) if self.table[q.item_id] is not None
                else Answer.failed(q.item_id, "table: no answer") for q in queries]


def test_poc_eval_scores_every_attribute_and_counts_errors(items, poc_folder):
    from players.poc.evaluation import evaluate_poc_player

    chosen = items[:4]
    table: dict[str, str | None] = {it.item_id: it.answer for it in items}
    first = chosen[0].answer.split(",")
    # Item 0: one value of its set dropped (or a wrong one added); item 1: an error answer.
    table[chosen[0].item_id] = ",".join(first[:-1]) if len(first) > 1 else first[0]
    if len(first) == 1:
        other = next(o for it in items for o in it.answer.split(",")
                     if it.extra["query_attribute"] == chosen[0].extra["query_attribute"] and o not in first)
        table[chosen[0].item_id] = ",".join(sorted([first[0], other]))
    table[chosen[1].item_id] = None
    result = evaluate_poc_player(SetPlayer(table), poc_folder, limit=4)
    expected_first = jaccard(table[chosen[0].item_id].split(","), first)
    assert result.errors == 1 and result.total == 4
    assert result.exact_accuracy() == 0.5
    assert result.mean_jaccard() == pytest.approx((expected_first + 0 + 1 + 1) / 4)
    assert result.lines()[-1] == f"exact: 0.5000 jaccard: {(expected_first + 2) / 4:.4f}"


def test_poc_eval_with_the_oracle_is_exact(poc_folder, capsys):
    assert main(["poc", "eval", "--player", "oracle", "--items", str(poc_folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "exact: 1.0000 jaccard: 1.0000"
    assert any(line.startswith("all ") and line.split()[1] == "24" for line in lines)
    assert sum(int(line.split()[1]) for line in lines[1:5] if line.split()[0] in ("size", "color", "material", "shape")) == 24


def rows_of(scene) -> list[tuple[str, str, str, str, int]]:
    regions = regions_of(scene.coords(), scene.directions).tolist()
    return [(o.size, o.color, o.material, o.shape, r) for o, r in zip(scene.objects, regions, strict=True)]


def test_causes_of_wrong_answers_separate_parsing_from_perception(items):
    from players.poc.evaluation import PocEvaluation

    item, other = items[0], next(it for it in items if it.program != items[0].program)
    wrong_scene = item.scene.with_coords(item.scene.coords()[::-1].copy())  # positions swapped: regions differ
    assert sorted(rows_of(wrong_scene)) != sorted(rows_of(item.scene))
    result = PocEvaluation()
    wrong = Answer(item.item_id, "nonsense")
    result.record(item, wrong, {"program": other.program, "scene": item.scene, "failure": None})
    result.record(item, wrong, {"program": item.program, "scene": wrong_scene, "failure": "solve"})
    result.record(item, wrong, {"program": other.program, "scene": wrong_scene, "failure": "rule"})
    result.record(item, wrong, {"program": item.program, "scene": item.scene, "failure": None})
    result.record(item, Answer(item.item_id, item.answer), {"program": item.program, "scene": None, "failure": None})
    assert dict(result.causes) == {"parsing": 1, "perception": 1, "both": 1, "neither": 1}
    assert result.parsed_right == 3 and result.perceived_right == 2 and result.perceived_traced == 4
    assert dict(result.failures) == {"solve": 1, "rule": 1}


# ---------------------------------------------------------------- the parser and the solver


@pytest.fixture(scope="module")
def examples(poc_folder):
    from players.poc.data import load_examples

    return load_examples(poc_folder)


@pytest.fixture(scope="module")
def brief_parser(examples):
    """A parser trained for seconds on 18 pairs, with its held-out token accuracy before training."""
    from players.poc.parser import PocParser, train_supervised

    torch.set_num_threads(1)
    parser = PocParser(seed=0)
    before = token_accuracy(parser, examples[18:])
    train_supervised(parser, examples[:18], steps=100, batch_size=16, learning_rate=3e-3)
    return parser, before


def token_accuracy(parser, examples) -> float:
    """Share of the gold program tokens the greedy parse has at the same position."""
    gold = parser.encode_programs([e.program for e in examples]).numpy()
    right = 0
    for program, row in zip(parser.parse([e.question for e in examples]), gold, strict=True):
        got = parser.encode_programs([program]).numpy()[0] if program is not None else np.zeros_like(row)
        right += int(((got == row) & (row != 0)).sum())
    return right / int((gold != 0).sum())


def test_the_parser_trained_briefly_learns_above_chance(brief_parser, examples):
    from players.poc.parser import program_accuracy

    parser, before = brief_parser
    after = token_accuracy(parser, examples[18:])
    assert before < 0.05  # one token in 34: an untrained parser is at chance
    assert after > 3 * before and after > 0.1
    assert program_accuracy(parser, examples[:18]) >= 0.8  # the pairs it saw


def test_clingo_answers_of_a_right_parse_equal_the_items_answer(brief_parser, examples):
    from players.pixel.program_tokens import program_to_tokens
    from players.poc.data import HiddenObjectSolver

    parser, _ = brief_parser
    solver = HiddenObjectSolver()
    right_parses = 0
    for example, program in zip(examples, parser.parse([e.question for e in examples]), strict=True):
        if program is None or program_to_tokens(program) != program_to_tokens(example.program):
            continue
        right_parses += 1
        solved = solver.solve(program, example.scene, example.environment)
        fresh = oracle_answers(example.environment, rows_of(example.scene), program_rule(program, example.scene))
        assert solved.values == example.answer == tuple(fresh), example.item_id
    assert right_parses >= 12


def test_a_parse_that_names_no_single_visible_object_is_a_rule_failure(examples):
    from clevr_game.programs import Node
    from players.poc.data import HiddenObjectSolver
    from players.poc.player import whole_domain

    example = next(e for e in examples if len(e.scene) > 1)
    # "the object left of the object": `unique(scene)` of several visible objects names none of them.
    vague = (Node("scene"), Node("unique", (0,)), Node("relate", (1,), ("left",)), Node("unique", (2,)),
             Node(f"query_{example.query_attribute}", (3,)))
    solved = HiddenObjectSolver().solve(vague, example.scene, example.environment)
    assert solved.values is None and solved.failure == "rule" and "matches" in solved.message
    domain = whole_domain(vague, example.question)
    assert domain is not None and set(example.answer) < set(domain)


def test_a_parse_whose_rule_admits_no_hidden_object_falls_back_instead_of_an_empty_answer(
        examples, player_files, items):
    """A wrong parse can ask for a value the environment rules out: an empty set is no answer."""
    from clevr_game.programs import Node
    from clevr_game.vocab import CLEVR_POC
    from players.poc.data import HiddenObjectSolver
    from players.poc.evaluation import poc_queries
    from players.poc.player import PocStateNeuroSymbolicPlayer

    index, example = next((k, e) for k, e in enumerate(examples)
                          if len(e.answer) < len(CLEVR_POC.values(e.query_attribute)))
    ruled_out = next(v for v in CLEVR_POC.values(example.query_attribute) if v not in example.answer)
    *head, unique, query = example.program
    narrowed = (*head, Node(f"filter_{example.query_attribute}", (len(head) - 1,), (ruled_out,)),
                Node("unique", (len(head),)), Node(query.function, (len(head) + 1,)))
    solved = HiddenObjectSolver().solve(narrowed, example.scene, example.environment)
    assert solved.values is None and solved.failure == "empty"

    player = PocStateNeuroSymbolicPlayer(player_files / "state-ns.pt")
    player.parser.parse = lambda questions, batch_size=256: [narrowed] * len(questions)
    answer = player.answer_batch(poc_queries(player, [items[index]]))[0]
    assert answer.ok and answer.text == ",".join(sorted(CLEVR_POC.values(example.query_attribute)))
    assert player.last_traces[0]["failure"] == "empty"


# ---------------------------------------------------------------- players by name, in the game


@pytest.fixture(scope="module")
def player_files(brief_parser, examples, tmp_path_factory):
    from players.poc.files import save_poc_player

    folder = tmp_path_factory.mktemp("players")
    parser, _ = brief_parser
    save_poc_player(folder / "state-ns.pt", "poc-state-neuro-symbolic", {"parser": parser.state()}, {})
    return folder


def test_poc_players_load_by_name_and_answer_canonical_sets_in_the_game(player_files, items, poc_folder):
    from envs.game import Game
    from envs.items import ItemPool
    from players.poc.training import train_neural
    from players.registry import load

    train_neural(str(poc_folder), str(poc_folder), str(player_files / "neural-nl.pt"), knowledge="nl", steps=20,
                 batch_size=8, log=lambda line: None)
    players = [load("poc-state-neuro-symbolic", path=player_files / "state-ns.pt"),
               load("poc-neural-nl", path=player_files / "neural-nl.pt")]
    for player in players:
        game = Game(ItemPool(items[:8]), player)
        answers = game.old_answers(range(8))
        assert all(a.ok for a in answers), [a.error for a in answers]
        for answer, item in zip(answers, items[:8], strict=True):
            values = answer.text.split(",")
            assert values == sorted(set(values))
            assert set(values) <= set(item.scene.vocabulary.values(item.extra["query_attribute"]))
    assert players[1].name == "poc-neural-nl"


def test_a_poc_player_file_of_another_kind_is_one_line(player_files):
    from clevr_game.errors import InputError
    from players.registry import load

    with pytest.raises(InputError, match="state-ns.pt: a 'poc-state-neuro-symbolic' player file, not 'poc-neural'"):
        load("poc-neural", path=player_files / "state-ns.pt")
    with pytest.raises(InputError, match="no such poc-neural player file; train one with: clevr-game poc train"):
        load("poc-neural-asp", path=player_files / "missing.pt")


# ---------------------------------------------------------------- perception of POC renders


@pytest.fixture(scope="module")
def rendered(examples, poc_folder):
    from players.pixel.images import ImageSpec
    from players.poc.perception import ensure_item_images, load_images

    spec = ImageSpec()
    chosen = examples[:12]
    paths = ensure_item_images(poc_folder, [e.item_id for e in chosen], [e.scene for e in chosen], spec)
    return chosen, load_images(paths, spec), spec


def attribute_accuracy_at_centres(network, examples, images, spec) -> np.ndarray:
    """(4,) accuracy of each attribute read at the cell of each true object centre."""
    from players.pixel.perception import STRIDE
    from players.poc.perception import POC_SIZES, scene_targets

    points, attributes, present = scene_targets([e.scene for e in examples], spec.width, spec.height)
    network.eval()
    with torch.no_grad():
        maps = network(torch.from_numpy(images))
    batch, slot = present.nonzero(as_tuple=True)
    cells = (points[batch, slot] / STRIDE).floor().long()
    rows = cells[:, 1].clamp(0, maps.heat.shape[1] - 1)
    columns = cells[:, 0].clamp(0, maps.heat.shape[2] - 1)
    logits = maps.attributes[batch, :, rows, columns]
    return np.array([(part.argmax(1) == attributes[batch, slot, k]).float().mean().item()
                     for k, part in enumerate(logits.split(POC_SIZES, dim=1))])


def test_perception_trained_briefly_learns_poc_values_above_chance(rendered):
    from players.pixel.perception import PerceptionConfig
    from players.poc.perception import PocPerceptionNetwork, perception_loss, scene_targets

    examples, images, spec = rendered
    torch.manual_seed(0)
    network = PocPerceptionNetwork(PerceptionConfig())
    before = attribute_accuracy_at_centres(network, examples, images, spec)
    targets = scene_targets([e.scene for e in examples], spec.width, spec.height)
    optimiser = torch.optim.Adam(network.parameters(), lr=3e-3)
    pixels = torch.from_numpy(images)
    network.train()
    losses = []
    for _ in range(40):
        loss = perception_loss(network(pixels), *targets, network.config.heatmap_sigma)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    after = attribute_accuracy_at_centres(network, examples, images, spec)
    chance = np.array([1 / 3, 1 / 8, 1 / 2, 1 / 4])  # size (with medium), colour, material, shape (with cone)
    assert losses[-1] < 0.5 * losses[0]
    assert after.mean() > before.mean() + 0.15 and after.mean() > chance.mean() + 0.15, (before, after)


def test_the_neuro_symbolic_player_perceives_renders_and_loads_by_name(rendered, player_files, poc_folder, items):
    from envs.game import Game
    from envs.items import ItemPool
    from players.poc.training import train_neuro_symbolic
    from players.registry import load

    examples, _, _ = rendered
    out = player_files / "ns.pt"
    info = train_neuro_symbolic(str(poc_folder), str(poc_folder), str(out), parser_file=str(player_files / "state-ns.pt"),
                                images=12, steps=5, batch_size=4, eval_limit=12, log=lambda line: None)
    assert 0.0 <= info["scene_accuracy"] <= 1.0 and info["perception_steps"] == 5
    player = load("poc-neuro-symbolic", path=out)
    assert (player.image_spec.preset, player.image_spec.width, player.image_spec.height) == ("fast", 128, 96)
    game = Game(ItemPool(items[:4]), player)  # the game renders what the player sees
    answers = game.old_answers(range(4))
    assert all(a.ok for a in answers), [a.error for a in answers]
    assert len(player.last_traces) == 4 and all("scene" in t for t in player.last_traces)


# ---------------------------------------------------------------- a POC mini-game attack


def test_a_poc_minigame_attack_keeps_every_valid_move_inside_the_environment(poc_folder, items, tmp_path, capsys):
    """The shipped parser player attacked on a mini-game of 10; each valid move re-solved by fresh clingo."""
    import json

    from players.poc.files import shipped_file

    if not shipped_file("poc-state-neuro-symbolic").is_file():
        pytest.skip("players/weights/poc-state-neuro-symbolic.pt is not shipped")
    out = tmp_path / "attack"
    status = main(["attack", "--player", "poc-state-neuro-symbolic", "--items", str(poc_folder),
                   "--minigame-size", "10", "--minigame", "0", "--steps", "256", "--num-envs", "64",
                   "--eval-samples", "8", "--seed", "0", "--out", str(out)])
    assert status == 0, capsys.readouterr().err
    assert capsys.readouterr().out.splitlines()[-1].startswith("consistency: ")
    by_id = {it.item_id: it for it in items}
    records = [json.loads(line) for line in (out / "manipulations.jsonl").read_text().splitlines()]
    assert records
    for record in records:
        item = by_id[record["item_id"]]
        environment = Path(item.extra["environment_file"]).read_text(encoding="utf-8")
        moved = item.scene.with_coords(np.array([o["3d_coords"] for o in record["scene"]["objects"]]))
        visible = rows_of(moved)
        assert [o["region"] for o in record["scene"]["objects"]] == [row[4] for row in visible]
        hidden = item.extra["hidden_object"]
        hidden_region = int(regions_of(np.array([hidden.coords]))[0])
        complete = list(visible)
        complete.insert(item.extra["hidden_index"],
                        (hidden.size, hidden.color, hidden.material, hidden.shape, hidden_region))
        assert oracle_satisfied(environment, complete), record["item_id"]
        assert ",".join(oracle_answers(environment, visible, item.extra["asp"])) == record["true_answer"] == item.answer


def test_perception_training_continues_from_a_poc_player_file(rendered, player_files, poc_folder):
    from players.poc.files import load_poc_player
    from players.poc.training import train_neuro_symbolic

    first, second = player_files / "ns-first.pt", player_files / "ns-continued.pt"
    common = {"parser_file": str(player_files / "state-ns.pt"), "images": 12, "batch_size": 4, "eval_limit": 12,
              "log": lambda line: None}
    train_neuro_symbolic(str(poc_folder), str(poc_folder), str(first), steps=3, **common)
    info = train_neuro_symbolic(str(poc_folder), str(poc_folder), str(second), steps=0, perception_init=str(first),
                                **common)
    assert info["perception_steps"] == 0 and info["perception_init"] == str(first)
    start = load_poc_player(first, "poc-neuro-symbolic")["perception"]["state_dict"]
    continued = load_poc_player(second, "poc-neuro-symbolic")["perception"]["state_dict"]
    assert start.keys() == continued.keys()
    assert all(torch.equal(start[k], continued[k]) for k in start)  # zero steps: the weights it started from
