"""The whole-process baseline for `clevr-game answer`: a plain script around CLEVR's own engine.

    python perf/clevr_engine_baseline.py SCENES_JSON QUESTIONS_JSON [--out PREDICTIONS_JSON]

Re-implemented here the way CLEVR's reference question engine
(clevr-dataset-gen, question_generation/question_engine.py) answers a question,
so the benchmark compares against what a user of the official tools runs:
`json.load` of both files, then every program executed node by node on its
scene dict, one handler per function taking (scene, input values, side
inputs); object sets are lists of indices, union and intersection go through
Python sets and come back sorted, `same_<attr>` tables are cached inside the
scene dict, and a node giving '__INVALID__' ends the program. The program is
read in the question file's own form (`function`, `inputs`, `value_inputs`).

Standard library only, and no import of the project: it is timed as a
subprocess, start-up included, against the `clevr-game answer` command.
Last line: `accuracy: X/Y`, as the command prints it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

INVALID = "__INVALID__"
ATTRIBUTES = ("size", "color", "material", "shape")

Handler = Callable[[dict[str, Any], list[Any], list[str]], Any]


def _scene(scene: dict[str, Any], inputs: list[Any], side_inputs: list[str]) -> Any:
    return list(range(len(scene["objects"])))


def _filter_by(attribute: str) -> Handler:
    def handler(scene: dict[str, Any], inputs: list[Any], side_inputs: list[str]) -> Any:
        value = side_inputs[0]
        kept = []
        for index in inputs[0]:
            if scene["objects"][index][attribute] == value:
                kept.append(index)
        return kept

    return handler


def _unique(scene: dict[str, Any], inputs: list[Any], side_inputs: list[str]) -> Any:
    return inputs[0][0] if len(inputs[0]) == 1 else INVALID


def _relate(scene: dict[str, Any], inputs: list[Any], side_inputs: list[str]) -> Any:
    return scene["relationships"][side_inputs[0]][inputs[0]]


def _union(scene: dict[str, Any], inputs: list[Any], side_inputs: list[str]) -> Any:
    return sorted(set(inputs[0]) | set(inputs[1]))


def _intersect(scene: dict[str, Any], inputs: list[Any], side_inputs: list[str]) -> Any:
    return sorted(set(inputs[0]) & set(inputs[1]))


def _count(scene: dict[str, Any], inputs: list[Any], side_inputs: list[str]) -> Any:
    return len(inputs[0])


def _exist(scene: dict[str, Any], inputs: list[Any], side_inputs: list[str]) -> Any:
    return len(inputs[0]) > 0


def _same_as(attribute: str) -> Handler:
    def handler(scene: dict[str, Any], inputs: list[Any], side_inputs: list[str]) -> Any:
        # The whole table once per scene, kept in the scene dict (as CLEVR's engine does).
        key = f"_same_{attribute}"
        if key not in scene:
            objects = scene["objects"]
            scene[key] = {
                i: [j for j, other in enumerate(objects) if j != i and other[attribute] == first[attribute]]
                for i, first in enumerate(objects)
            }
        return scene[key][inputs[0]]

    return handler


def _query(attribute: str) -> Handler:
    def handler(scene: dict[str, Any], inputs: list[Any], side_inputs: list[str]) -> Any:
        return scene["objects"][inputs[0]][attribute]

    return handler


def _equal(scene: dict[str, Any], inputs: list[Any], side_inputs: list[str]) -> Any:
    return inputs[0] == inputs[1]


def _less_than(scene: dict[str, Any], inputs: list[Any], side_inputs: list[str]) -> Any:
    return inputs[0] < inputs[1]


def _greater_than(scene: dict[str, Any], inputs: list[Any], side_inputs: list[str]) -> Any:
    return inputs[0] > inputs[1]


HANDLERS: dict[str, Handler] = {
    "scene": _scene, "unique": _unique, "relate": _relate, "union": _union, "intersect": _intersect,
    "count": _count, "exist": _exist, "equal_integer": _equal, "equal_object": _equal,
    "less_than": _less_than, "greater_than": _greater_than,
}
for _attribute in ATTRIBUTES:
    HANDLERS[f"filter_{_attribute}"] = _filter_by(_attribute)
    HANDLERS[f"query_{_attribute}"] = _query(_attribute)
    HANDLERS[f"same_{_attribute}"] = _same_as(_attribute)
    HANDLERS[f"equal_{_attribute}"] = _equal


def answer_question(program: list[dict[str, Any]], scene: dict[str, Any]) -> Any:
    """The last node's output, or '__INVALID__' from the node that failed."""
    outputs: list[Any] = []
    for node in program:
        output = HANDLERS[node["function"]](scene, [outputs[i] for i in node["inputs"]], node.get("value_inputs", []))
        outputs.append(output)
        if output == INVALID:
            break
    return outputs[-1]


def answer_text(output: Any) -> str:
    """An output as the questions file writes answers ('yes'/'no', '3', 'red')."""
    if isinstance(output, bool):
        return "yes" if output else "no"
    return str(output)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenes")
    parser.add_argument("questions")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    with open(args.scenes) as f:
        scenes = json.load(f)["scenes"]
    with open(args.questions) as f:
        questions = json.load(f)["questions"]
    scene_of = {scene["image_index"]: scene for scene in scenes}
    correct = total = 0
    predictions = []
    for question in questions:
        predicted = answer_text(answer_question(question["program"], scene_of[question["image_index"]]))
        predictions.append({"question_index": question["question_index"], "image_index": question["image_index"],
                            "answer": predicted})
        if "answer" in question:
            total += 1
            correct += predicted == str(question["answer"])
    if args.out is not None:
        with open(args.out, "w") as f:
            json.dump({"predictions": predictions}, f)
    print(f"accuracy: {correct}/{total}")


if __name__ == "__main__":
    main()
