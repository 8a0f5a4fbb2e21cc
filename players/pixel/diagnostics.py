"""Where the neuro-symbolic player's wrong answers come from: the parser, perception, or both.

`python -m players.pixel.diagnostics --data DIR [--weights FILE]` reads a
CLEVR-format dataset, renders its images with the player's spec when missing,
and measures each part of the pipeline against the ground truth:

- parser: programs token for token equal to the question's, and answers of the
  parsed program on the *true* scene (a parse that differs in form but answers
  alike is no error);
- perception: perceived objects matched one to one with the true ones (within
  `MATCH_PIXELS` of the projected centre), per-attribute accuracy on matched
  objects, ground position error, and answers of the *true* program on the
  perceived scene;
- the error split of the end-to-end answers (parser only, perception only,
  both, neither: the two parts are each right alone but wrong together);
- the relation convention: real CLEVR scenes store relationships from a
  jittered camera, while the renderer and perception use the fixed one; the
  share of questions whose answer changes when the true scene's relations are
  recomputed with the fixed camera is an error no fixed-camera render can avoid.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from typing import Any

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from clevr_game.dataset import dataset_files, load_questions
from clevr_game.errors import InputError
from clevr_game.programs import SceneFacts, execute
from clevr_game.programs.facts import compile_scene
from clevr_game.scene import DEFAULT_DIRECTIONS, Scene
from clevr_game.vocab import ATTRIBUTES
from players.families import question_family
from players.pixel.checkpoint import PixelPlayerFile, load_player_file
from players.pixel.images import dataset_images
from players.pixel.neuro_symbolic import (
    FELL_BACK,
    REPAIRED,
    NeuroSymbolicNetwork,
    PerceivedAlternatives,
    execute_on,
    parse,
    perceive_alternatives,
)
from players.pixel.perception import PERCEIVED_VOCABULARY, PerceivedScene
from players.pixel.program_tokens import arities, program_to_tokens
from players.pixel.projection import image_points
from players.state.checkpoint import shipped_path
from players.state.features import MAX_QUESTION_TOKENS

MATCH_PIXELS = 6.0
"""A perceived centre this close (in pixels, at the player's image size) to a true one may match it."""


def _safe_execute(program: Any, facts: SceneFacts) -> str:
    try:
        return execute(program, facts)
    except InputError:  # a parsed program whose types do not fit
        return "<invalid>"


def _fixed_camera_facts(scene: Scene) -> SceneFacts:
    """The scene's facts with relations recomputed from its coordinates and the fixed camera's directions."""
    ids = np.array([[PERCEIVED_VOCABULARY.index(a, obj.attribute(a)) for a in ATTRIBUTES] for obj in scene.objects],
                   dtype=np.int64).reshape(-1, len(ATTRIBUTES))
    return SceneFacts.from_arrays(ids, scene.coords(), DEFAULT_DIRECTIONS, PERCEIVED_VOCABULARY)


def match_objects(scene: Scene, perceived: PerceivedScene, width: int, height: int) -> list[tuple[int, int]]:
    """(true index, perceived index) pairs: the assignment of least total pixel distance, pairs within MATCH_PIXELS."""
    if not scene.objects or not len(perceived.points):
        return []
    truth = image_points(scene.coords(), width, height)
    distances = np.linalg.norm(truth[:, None, :] - perceived.points[None, :, :], axis=2)
    rows, columns = linear_sum_assignment(distances)
    return [(int(r), int(c)) for r, c in zip(rows, columns, strict=True) if distances[r, c] <= MATCH_PIXELS]


def perception_report(scenes: list[Scene], perceived: list[PerceivedScene], width: int, height: int) -> dict[str, Any]:
    """Objects found, missed and extra; per-attribute accuracy and ground position error on the matched ones."""
    found = missed = extra = 0
    right = Counter[str]()
    errors: list[float] = []
    for scene, seen in zip(scenes, perceived, strict=True):
        pairs = match_objects(scene, seen, width, height)
        found += len(pairs)
        missed += len(scene.objects) - len(pairs)
        extra += len(seen.scores) - len(pairs)
        coords = scene.coords()
        for true_index, seen_index in pairs:
            obj = scene.objects[true_index]
            for k, attribute in enumerate(ATTRIBUTES):
                value = PERCEIVED_VOCABULARY.values(attribute)[int(seen.attributes[seen_index, k])]
                right[attribute] += value == obj.attribute(attribute)
            errors.append(float(np.linalg.norm(coords[true_index, :2] - seen.coords[seen_index, :2])))
        right["all four"] += sum(
            all(PERCEIVED_VOCABULARY.values(a)[int(seen.attributes[s, k])] == scene.objects[t].attribute(a)
                for k, a in enumerate(ATTRIBUTES))
            for t, s in pairs)
    exact_scenes = sum(
        len(match_objects(s, p, width, height)) == len(s.objects) == len(p.scores) for s, p in zip(scenes, perceived, strict=True))
    position = np.array(errors) if errors else np.zeros(1)
    return {
        "objects": found + missed, "found": found, "missed": missed, "extra": extra,
        "attribute_accuracy": {a: round(right[a] / max(found, 1), 4) for a in (*ATTRIBUTES, "all four")},
        "position_error_mean": round(float(position.mean()), 4),
        "position_error_p95": round(float(np.percentile(position, 95)), 4),
        "position_error_over_0.2": round(float((position > 0.2).mean()), 4),
        "scenes_all_objects_right_count": round(exact_scenes / max(len(scenes), 1), 4),
    }


def diagnose(player_file: PixelPlayerFile, folder: str | os.PathLike[str], *, limit: int | None = None,
             render_workers: int = 1, batch_size: int = 256, examples: int = 0,
             repair: bool | None = None) -> dict[str, Any]:
    """The report described in the module doc, as a dict of plain values; `repair` None: as the file says."""
    if player_file.kind != "neuro-symbolic":
        raise InputError(f"diagnostics are for the neuro-symbolic player, not a {player_file.kind!r} file")
    model = player_file.build()
    assert isinstance(model, NeuroSymbolicNetwork)
    spec, tokens, vocabulary = player_file.image, player_file.program_tokens, player_file.vocabulary()
    arity = torch.from_numpy(arities(tokens))
    scenes, stack = dataset_images(folder, spec, workers=render_workers)
    _, questions_path = dataset_files(folder)
    questions = load_questions(questions_path)[:limit]
    row_of = {(s.image_index if s.image_index is not None else i): i for i, s in enumerate(scenes)}
    used = sorted({row_of[q.image_index] for q in questions})
    alternatives: dict[int, PerceivedAlternatives] = {}
    for start in range(0, len(used), 64):
        rows = used[start:start + 64]
        seen = perceive_alternatives(model, torch.from_numpy(stack[rows]), spec.width, spec.height)
        alternatives.update(zip(rows, seen, strict=True))
    perceived = {row: alternatives[row].scene() for row in used}
    # What the player executes on: the alternatives when it repairs, else the scene as perceived.
    repairing = model.config.repair if repair is None else repair
    executed_on: dict[int, PerceivedScene | PerceivedAlternatives] = dict(alternatives if repairing else perceived)
    words = np.stack([vocabulary.encode(q.text, MAX_QUESTION_TOKENS) for q in questions])
    programs = []
    for start in range(0, len(questions), batch_size):
        chunk = words[start:start + batch_size]
        longest = max(int((chunk != 0).sum(axis=1).max()), 1)
        programs.extend(parse(model, torch.from_numpy(chunk[:, :longest]), arity, tokens))
    true_facts = {row: compile_scene(scenes[row]) for row in used}
    fixed_facts = {row: _fixed_camera_facts(scenes[row]) for row in used}
    counts = Counter[str]()
    by_family: dict[str, Counter[str]] = {}
    unknown_words = Counter[str]()
    wrong_parses: list[dict[str, Any]] = []
    for question, program in zip(questions, programs, strict=True):
        row = row_of[question.image_index]
        truth = str(question.answer).strip().lower()
        answer, came = execute_on(program, executed_on[row], player_file.fallback, "no")
        end_to_end = answer == truth
        exact = program_to_tokens(program) == program_to_tokens(question.program)
        parser_right = _safe_execute(program, true_facts[row]) == truth
        perception_right = execute_on(question.program, executed_on[row], player_file.fallback, "no")[0] == truth
        family = question_family(question)
        tally = by_family.setdefault(family, Counter())
        for name, value in (("questions", True), ("right", end_to_end), ("program_exact", exact),
                            ("parser_answer_right", parser_right), ("perception_answer_right", perception_right),
                            ("fallback", came == FELL_BACK), ("repaired", came == REPAIRED),
                            ("fixed_camera_changes_answer", _safe_execute(question.program, fixed_facts[row]) != truth)):
            counts[name] += value
            tally[name] += value
        if not end_to_end:
            kind = ("parser_only" if not parser_right and perception_right else
                    "perception_only" if parser_right and not perception_right else
                    "both" if not parser_right else "neither")
            counts[f"wrong_{kind}"] += 1
        if not exact:
            unknown_words.update(vocabulary.unknown_words(question.text))
            if len(wrong_parses) < examples:
                wrong_parses.append({"question": question.text, "parsed": " ".join(program_to_tokens(program)),
                                     "true": " ".join(program_to_tokens(question.program))})
    total = max(counts["questions"], 1)
    shares = {name: round(counts[name] / total, 4) for name in (
        "right", "program_exact", "parser_answer_right", "perception_answer_right", "fallback", "repaired",
        "fixed_camera_changes_answer", "wrong_parser_only", "wrong_perception_only", "wrong_both", "wrong_neither")}
    families = {family: {name: round(tally[name] / tally["questions"], 4) for name in (
        "right", "program_exact", "parser_answer_right", "perception_answer_right")} | {"questions": tally["questions"]}
        for family, tally in sorted(by_family.items())}
    report: dict[str, Any] = {
        "questions": counts["questions"], "repair": repairing, **shares, "families": families,
        "perception": perception_report([scenes[r] for r in used], [perceived[r] for r in used], spec.width, spec.height),
        "unknown_words_in_wrong_parses": dict(unknown_words.most_common(20)),
    }
    if examples:
        report["wrong_parses"] = wrong_parses
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m players.pixel.diagnostics", description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="dataset folder (scenes.json + questions.json)")
    parser.add_argument("--weights", default=None, help="neuro-symbolic player file (default: the shipped one)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions")
    parser.add_argument("--examples", type=int, default=0, help="show this many wrongly parsed questions")
    parser.add_argument("--render-workers", type=int, default=1)
    parser.add_argument("--no-repair", action="store_true", help="answer on the scene as perceived, never repaired")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    weights = args.weights or shipped_path("neuro-symbolic.pt")
    try:
        report = diagnose(load_player_file(weights), args.data, limit=args.limit,
                          render_workers=args.render_workers, examples=args.examples,
                          repair=False if args.no_repair else None)
    except InputError as exc:
        print(f"diagnostics: error: {exc}")
        return exc.exit_status
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
