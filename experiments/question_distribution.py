"""How a CLEVR questions file is distributed: filters, program lengths, words, answers, families.

Issue 67 compares the questions `clevr-game generate --templates clevr` draws with those of
CLEVR's own generator on the same scenes. Every statistic is measured on the expanded
program (one node per function, a `filter_<attr>` node per named value), so a file in
CLEVR's question form and one in the template form (`type` / `side_inputs`, composites
such as `filter_unique` with their values) give the same numbers. Each statistic is a
ratio of sums over scenes, and its standard error comes from a bootstrap over scenes:
a question is drawn with the scene it is asked about, never alone, because the questions
of one scene share its objects.

    python -m experiments.question_distribution --scenes clevr_game/data/clevr_real/CLEVR_val_scenes_500.json \
        --questions /tmp/clevr-gen/CLEVR_val_questions_official_500.json \
        --json results/question-distribution/official.json
    python -m experiments.question_distribution --scenes clevr_game/data/clevr_real/CLEVR_val_scenes_500.json \
        --questions /tmp/ours/questions.json --json results/question-distribution/project-before.json
    python -m experiments.question_distribution --scenes clevr_game/data/clevr_real/CLEVR_val_scenes_500.json \
        --questions /tmp/clevr-gen/CLEVR_val_questions_official_500.json --questions /tmp/ours/questions.json

(results/question-distribution/README.md says how the two questions files were made.)
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clevr_game.errors import InputError
from clevr_game.programs import TEMPLATE_FUNCTIONS, Node, Program, parse_program
from clevr_game.questions import Template, expand_program
from clevr_game.scene import write_json_atomic

RESAMPLES = 1000
SEED = 0
UNKNOWN_FAMILY = "unknown"
_CHUNK = 100  # resamples drawn at once: bounds the weight matrix for files of many scenes

# Per-question quantities averaged over the questions of a family and over all of them.
_PER_QUESTION = ("filters_per_question", "program_length", "words_per_question")


def expanded_program(raw: Any, where: str = "") -> Program:
    """The program in CLEVR's expanded form, whichever form `raw` is written in.

    Template-form composites carry concrete values here, not param names, so each value
    gets a name of its own and `expand_program` drops the empty ones as it does for a template.
    """
    program = parse_program(raw, where)
    if not any(node.function in TEMPLATE_FUNCTIONS for node in program):
        return program
    named: list[Node] = []
    values: dict[str, str | None] = {}
    for i, node in enumerate(program):
        names = tuple(f"v{i}.{j}" for j in range(len(node.value_inputs)))
        values.update({name: value or None for name, value in zip(names, node.value_inputs, strict=True)})
        named.append(Node(node.function, node.inputs, names))
    return expand_program(Template((), tuple(named), {}, (), "", 0, 0), values)


def answer_text(answer: Any) -> str:
    """The answer as CLEVR's released files spell it (CLEVR's generator writes booleans and integers)."""
    if isinstance(answer, bool):
        return "yes" if answer else "no"
    return str(answer)


def family_of(question: dict[str, Any]) -> str:
    name = question.get("template_filename")
    if not isinstance(name, str) or not name:
        return UNKNOWN_FAMILY
    return name[:-5] if name.endswith(".json") else name


def _load(path: str | Path, key: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise InputError(f"{path}: cannot read JSON ({error})") from None
    records = data.get(key) if isinstance(data, dict) else None
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise InputError(f"{path}: expected a JSON object with a list of {key!r}")
    return records


def _scene_key(record: dict[str, Any]) -> Any:
    """Questions name their scene by `image_index`; `image_filename` serves files without it."""
    if "image_index" in record:
        return record["image_index"]
    return record.get("image_filename")


@dataclass
class Measured:
    """Per-scene sums of one questions file, and the statistics that are ratios of them."""

    scenes_path: str
    questions_path: str
    sums: np.ndarray  # scenes x sum keys
    keys: dict[str, int]
    ratios: dict[str, tuple[str, str]]  # statistic -> (numerator key, denominator key)
    questions: int
    resamples: int = RESAMPLES
    seed: int = SEED
    _replicates: np.ndarray | None = field(default=None, repr=False)

    def values(self) -> dict[str, float]:
        total = self.sums.sum(axis=0)
        return {name: _ratio(total[self.keys[num]], total[self.keys[den]]) for name, (num, den) in self.ratios.items()}

    def replicates(self) -> np.ndarray:
        """resamples x statistics (in `ratios` order); NaN where a resample holds no question of the kind."""
        if self._replicates is None:
            rng = np.random.default_rng(self.seed)
            n = self.sums.shape[0]
            numerators = [self.keys[num] for num, _ in self.ratios.values()]
            denominators = [self.keys[den] for _, den in self.ratios.values()]
            rows = []
            for start in range(0, self.resamples, _CHUNK):
                size = min(_CHUNK, self.resamples - start)
                drawn = rng.integers(0, n, size=(size, n)) + n * np.arange(size)[:, None]
                weights = np.bincount(drawn.ravel(), minlength=size * n).reshape(size, n)
                totals = weights @ self.sums
                with np.errstate(invalid="ignore", divide="ignore"):
                    rows.append(totals[:, numerators] / totals[:, denominators])
            self._replicates = np.vstack(rows)
        return self._replicates

    def standard_errors(self) -> dict[str, float]:
        reps = self.replicates()
        errors = {}
        for column, name in enumerate(self.ratios):
            finite = reps[:, column][np.isfinite(reps[:, column])]
            errors[name] = float(np.std(finite, ddof=1)) if len(finite) > 1 else math.nan
        return errors

    def answer_shares(self) -> dict[str, float]:
        return {name[len("answer_share/"):]: value for name, value in self.values().items()
                if name.startswith("answer_share/")}


def _ratio(numerator: float, denominator: float) -> float:
    return float(numerator / denominator) if denominator else math.nan


def measure(scenes_path: str | Path, questions_path: str | Path, *,
            resamples: int = RESAMPLES, seed: int = SEED) -> Measured:
    scenes = _load(scenes_path, "scenes")
    questions = _load(questions_path, "questions")
    row = {_scene_key(scene): i for i, scene in enumerate(scenes)}
    per_scene = [Counter({"scenes": 1}) for _ in scenes]
    families: set[str] = set()
    for q, question in enumerate(questions):
        where = f"{questions_path}: question {q}, "
        scene = row.get(_scene_key(question))
        if scene is None:
            raise InputError(f"{where}scene {_scene_key(question)!r} is not in {scenes_path}")
        program = expanded_program(question.get("program"), where)
        text = question.get("question")
        if not isinstance(text, str):
            raise InputError(f"{where}field 'question': missing")
        if "answer" not in question:
            raise InputError(f"{where}field 'answer': missing")
        family = family_of(question)
        families.add(family)
        counts = per_scene[scene]
        sizes = {
            "filters_per_question": sum(node.function.startswith("filter_") for node in program),
            "program_length": len(program),
            "words_per_question": len(text.split()),
        }
        for suffix in ("", f"/{family}"):
            counts[f"questions{suffix}"] += 1
            for name, size in sizes.items():
                counts[f"{name}{suffix}"] += size
            if program[-1].function == "count":
                try:
                    counts[f"count_answers{suffix}"] += int(question["answer"])
                except (TypeError, ValueError):
                    raise InputError(f"{where}a count question answers {question['answer']!r}") from None
                counts[f"count_questions{suffix}"] += 1
        counts[f"answer/{answer_text(question['answer'])}"] += 1

    keys: dict[str, int] = {}
    for counts in per_scene:
        for key in counts:
            keys.setdefault(key, len(keys))
    sums = np.zeros((len(scenes), len(keys)))
    for i, counts in enumerate(per_scene):
        for key, value in counts.items():
            sums[i, keys[key]] = value

    ratios: dict[str, tuple[str, str]] = {"questions_per_scene": ("questions", "scenes")}
    ratios.update({name: (name, "questions") for name in _PER_QUESTION})
    ratios["count_share"] = ("count_questions", "questions")
    ratios["count_answer_mean"] = ("count_answers", "count_questions")
    for family in sorted(families):
        ratios[f"family_share/{family}"] = (f"questions/{family}", "questions")
        ratios.update({f"{name}/{family}": (f"{name}/{family}", f"questions/{family}") for name in _PER_QUESTION})
        if f"count_questions/{family}" in keys:
            ratios[f"count_answer_mean/{family}"] = (f"count_answers/{family}", f"count_questions/{family}")
    answers = sorted((key for key in keys if key.startswith("answer/")), key=lambda k: (-sums[:, keys[k]].sum(), k))
    ratios.update({f"answer_share/{key[len('answer/'):]}": (key, "questions") for key in answers})
    for needed in ("questions", "count_questions", "count_answers", *_PER_QUESTION):
        keys.setdefault(needed, len(keys))
    if sums.shape[1] < len(keys):
        sums = np.hstack([sums, np.zeros((len(scenes), len(keys) - sums.shape[1]))])
    return Measured(str(scenes_path), str(questions_path), sums, keys, ratios, len(questions), resamples, seed)


def _rounded(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 6)


def summary(measured: Measured) -> dict[str, Any]:
    values, errors = measured.values(), measured.standard_errors()
    return {
        "scenes_file": measured.scenes_path,
        "questions_file": measured.questions_path,
        "scenes": int(measured.sums.shape[0]),
        "questions": measured.questions,
        "bootstrap": {"unit": "scene", "resamples": measured.resamples, "seed": measured.seed,
                      "statistic": "ratio of sums over the resampled scenes; se = their standard deviation"},
        "statistics": {name: {"value": _rounded(values[name]), "se": _rounded(errors[name])} for name in values},
    }


def statistics(scenes_path: str | Path, questions_path: str | Path, *,
               resamples: int = RESAMPLES, seed: int = SEED) -> dict[str, Any]:
    """Every statistic of a questions file on its scenes, with its bootstrap standard error (JSON-ready)."""
    return summary(measure(scenes_path, questions_path, resamples=resamples, seed=seed))


def total_variation(p: dict[str, float], q: dict[str, float]) -> float:
    return 0.5 * sum(abs(p.get(a, 0.0) - q.get(a, 0.0)) for a in set(p) | set(q))


def answer_total_variation(a: Measured, b: Measured) -> dict[str, float | None]:
    """The distance between the answer distributions, and its bootstrap standard error.

    Both files' replicates come from the same seed; on the same scenes that pairs each
    resample's scenes across the files, as the scene-to-scene variation they share asks.
    """
    def shares(measured: Measured, rep: np.ndarray) -> dict[str, float]:
        return {name[len("answer_share/"):]: float(rep[column]) for column, name in enumerate(measured.ratios)
                if name.startswith("answer_share/")}

    reps = [total_variation(shares(a, ra), shares(b, rb)) for ra, rb in zip(a.replicates(), b.replicates(), strict=True)]
    finite = [r for r in reps if math.isfinite(r)]
    se = float(np.std(finite, ddof=1)) if len(finite) > 1 else math.nan
    return {"value": _rounded(total_variation(a.answer_shares(), b.answer_shares())), "se": _rounded(se)}


def _cell(value: float | None, se: float | None) -> str:
    if value is None:
        return f"{'-':>9} {'':>6}"
    rse = "" if se is None or not value else f"{100 * se / abs(value):5.1f}%"
    return f"{value:9.4f} {rse:>6}"


def table(summaries: list[dict[str, Any]]) -> list[str]:
    """One column per file (value, relative standard error); with two files B/A-1 and z of the difference."""
    names: list[str] = []
    for s in summaries:
        names.extend(name for name in s["statistics"] if name not in names)
    labels = "AB"
    lines = [f"{labels[i]} = {s['questions_file']} ({s['scenes']} scenes, {s['questions']} questions)"
             for i, s in enumerate(summaries)]
    header = f"{'statistic':<36}" + "".join(f"{labels[i]:>9} {'rse':>6}" for i in range(len(summaries)))
    if len(summaries) == 2:
        header += f"{'B/A-1':>9} {'z':>7}"
    lines.append(header)
    for name in names:
        cells = [s["statistics"].get(name, {"value": None, "se": None}) for s in summaries]
        line = f"{name:<36}" + "".join(_cell(c["value"], c["se"]) for c in cells)
        if len(cells) == 2:
            a, b = cells
            both = a["value"] is not None and b["value"] is not None
            relative = f"{100 * (b['value'] - a['value']) / abs(a['value']):8.1f}%" if both and a["value"] else f"{'-':>9}"
            spread = math.hypot(a["se"] or 0.0, b["se"] or 0.0)
            z = f"{(b['value'] - a['value']) / spread:7.1f}" if both and spread else f"{'-':>7}"
            line += f"{relative} {z}"
        lines.append(line)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", required=True, help="the CLEVR scenes file the questions are about")
    parser.add_argument("--questions", action="append", required=True,
                        help="a CLEVR questions file (either program form); give it twice to compare two")
    parser.add_argument("--json", help="write the statistics (with their standard errors) here")
    parser.add_argument("--resamples", type=int, default=RESAMPLES)
    args = parser.parse_args(argv)
    if len(args.questions) > 2:
        parser.error("--questions: at most two files")
    try:
        measured = [measure(args.scenes, path, resamples=args.resamples) for path in args.questions]
    except InputError as error:
        parser.exit(2, f"error: {error}\n")
    summaries = [summary(m) for m in measured]
    for line in table(summaries):
        print(line)
    result: dict[str, Any] = summaries[0]
    if len(measured) == 2:
        tv = answer_total_variation(*measured)
        print(f"answer distribution total variation distance (A, B): {tv['value']:.4f} (bootstrap se {tv['se']:.4f})")
        result = {"questions": summaries, "answer_total_variation": tv}
    if args.json:
        write_json_atomic(Path(args.json), result, indent=2)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
