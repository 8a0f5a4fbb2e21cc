"""`clevr-game poc eval`: any player on CLEVR-POC items, exact accuracy and Jaccard per asked attribute.

Queries are built as the game builds them (the visible scene, the rendered
image for players that read images, the program, the environment's text),
restricted to what the player needs. An error answer scores 0 on both measures
and is counted. For players that report their parse and perception
(`last_traces`, the neuro-symbolic ones), each wrong answer is put down to the
parse (the program differs from the item's), the perception (the perceived
visible objects, with their regions, differ from the true ones), both, or
neither; and the pipeline's fallbacks are counted by what failed.

With `keep_records`, one dict per item is kept as well (`PocEvaluation.records`,
written by `poc eval --records` as JSON lines) so that a reported figure can be
checked item by item.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from clevr_game.asp.items import poc_items
from clevr_game.asp.metrics import jaccard
from clevr_game.errors import InputError
from clevr_game.items import Item
from clevr_game.vocab import ATTRIBUTES
from players.pixel.program_tokens import program_to_tokens
from players.protocol import NEED_IMAGE, Answer, Player, Query

CAUSES = ("parsing", "perception", "both", "neither")


@dataclass
class PocEvaluation:
    """Per asked attribute: items, exact answers, summed Jaccard; error and cause counts."""

    items: Counter = field(default_factory=Counter)
    exact: Counter = field(default_factory=Counter)
    jaccard: Counter = field(default_factory=Counter)
    errors: int = 0
    first_error: str | None = None
    causes: Counter = field(default_factory=Counter)
    failures: Counter = field(default_factory=Counter)
    traced: int = 0
    parsed_right: int = 0
    perceived_right: int = 0
    perceived_traced: int = 0
    keep_records: bool = False
    records: list[dict[str, Any]] = field(default_factory=list)

    def record(self, item: Item, answer: Answer, trace: dict | None = None) -> bool:
        attribute = str(item.extra.get("query_attribute"))
        true = set(item.answer.split(","))
        self.items[attribute] += 1
        score = 0.0
        if not answer.ok:
            self.errors += 1
            self.first_error = self.first_error or answer.error
            right = False
        else:
            predicted = set(str(answer.text).split(","))
            right = predicted == true
            score = jaccard(predicted, true)
            self.exact[attribute] += right
            self.jaccard[attribute] += score
        detail = self._record_trace(item, trace, right) if trace is not None else None
        if self.keep_records:
            row: dict[str, Any] = {
                "item": item.item_id, "environment": item.environment, "attribute": attribute,
                "question": item.question, "answer": sorted(true)}
            if answer.ok:
                row["predicted"] = sorted(set(str(answer.text).split(",")))
            else:
                # One line, so a record stays greppable and a multi-line traceback cannot split it.
                row["error"] = " ".join(str(answer.error).split())
            row.update(exact=right, jaccard=score)
            if detail is not None:
                row.update(detail)
            self.records.append(row)
        return right

    def _record_trace(self, item: Item, trace: dict, right: bool) -> dict[str, Any]:
        """Count the trace; return what was judged of it (the per-item record's detail)."""
        from players.poc.perception import scene_signature

        self.traced += 1
        program = trace.get("program")
        parse_ok = program is not None and program_to_tokens(program) == program_to_tokens(item.program)
        self.parsed_right += parse_ok
        perceived = trace.get("scene")
        perception_ok = True
        if perceived is not None:
            self.perceived_traced += 1
            perception_ok = scene_signature(perceived) == scene_signature(item.scene)
            self.perceived_right += perception_ok
        if trace.get("failure"):
            self.failures[trace["failure"]] += 1
        if not right:
            cause = {(False, True): "parsing", (True, False): "perception", (False, False): "both"}.get(
                (parse_ok, perception_ok), "neither")
            self.causes[cause] += 1
        detail: dict[str, Any] = {"program_right": parse_ok,
                                  "perception_right": perception_ok if perceived is not None else None,
                                  "failure": trace.get("failure")}
        if not parse_ok:
            # The wrong program itself, so a parsing error can be read without rerunning the player.
            detail["program"] = None if program is None else program_to_tokens(program)
        if not right:
            detail["cause"] = cause
        return detail

    @property
    def total(self) -> int:
        return sum(self.items.values())

    def exact_accuracy(self, attribute: str | None = None) -> float:
        count = self.items[attribute] if attribute else self.total
        right = self.exact[attribute] if attribute else sum(self.exact.values())
        return right / count if count else 0.0

    def mean_jaccard(self, attribute: str | None = None) -> float:
        count = self.items[attribute] if attribute else self.total
        summed = self.jaccard[attribute] if attribute else sum(self.jaccard.values())
        return summed / count if count else 0.0

    def lines(self) -> list[str]:
        out = [f"{'attribute':<10} {'items':>6} {'exact':>7} {'jaccard':>8}"]
        for attribute in ATTRIBUTES:
            if self.items[attribute]:
                out.append(f"{attribute:<10} {self.items[attribute]:>6} {self.exact_accuracy(attribute):>7.4f} "
                           f"{self.mean_jaccard(attribute):>8.4f}")
        out.append(f"{'all':<10} {self.total:>6} {self.exact_accuracy():>7.4f} {self.mean_jaccard():>8.4f}")
        out.append(f"player errors: {self.errors}" + (f" (first: {self.first_error})" if self.first_error else ""))
        if self.traced:
            out.append(f"program accuracy: {self.parsed_right / self.traced:.4f}")
            if self.perceived_traced:
                out.append(f"perception accuracy (every visible object and region right): "
                           f"{self.perceived_right / self.perceived_traced:.4f}")
            out.append("wrong answers by cause: " + " ".join(f"{c} {self.causes[c]}" for c in CAUSES))
            fallbacks = sum(self.failures.values())
            detail = ", ".join(f"{k} {v}" for k, v in sorted(self.failures.items()))
            out.append(f"pipeline fallbacks: {fallbacks}" + (f" ({detail})" if detail else ""))
        out.append(f"exact: {self.exact_accuracy():.4f} jaccard: {self.mean_jaccard():.4f}")
        return out


def poc_queries(player: Player, items: Sequence[Item], image_paths: Sequence[str] | None = None) -> list[Query]:
    """The game's queries for `items` (unmoved), restricted to what `player` needs."""
    paths = list(image_paths) if image_paths is not None else [None] * len(items)
    return [
        Query(item.item_id, item.question, scene=item.scene, image_path=path, program=item.program,
              vocabulary=item.scene.vocabulary, environment=item.extra.get("environment_text")
              ).restricted_to(player.needs)
        for item, path in zip(items, paths, strict=True)
    ]


def evaluate_poc_player(
    player: Player, folder: str | os.PathLike[str], *, limit: int | None = None, offset: int = 0,
    batch_size: int = 128, render_workers: int = 2, progress: bool = False, keep_records: bool = False,
) -> PocEvaluation:
    """Ask `player` `limit` items of the `poc generate` folder from position `offset` on; images rendered for
    pixel players. `keep_records`: one dict per item, in item order, in the result's `records`."""
    items = poc_items(folder)[offset:][:limit]
    if not items:
        raise InputError(f"{folder}: no CLEVR-POC items to evaluate")
    paths = None
    if NEED_IMAGE in player.needs:
        from players.pixel.images import ImageSpec
        from players.poc.perception import ensure_item_images

        spec = getattr(player, "image_spec", None) or ImageSpec()
        paths = [str(p) for p in ensure_item_images(folder, [it.item_id for it in items], [it.scene for it in items],
                                                    spec, workers=render_workers, progress=progress)]
    result = PocEvaluation(keep_records=keep_records)
    queries = poc_queries(player, items, paths)
    for start in range(0, len(items), batch_size):
        chunk = queries[start:start + batch_size]
        answers = player.answer_batch(chunk)
        traces = getattr(player, "last_traces", None)
        traces = traces if isinstance(traces, list) and len(traces) == len(chunk) else [None] * len(chunk)
        for item, answer, trace in zip(items[start:start + batch_size], answers, traces, strict=True):
            result.record(item, answer, trace)
    return result
