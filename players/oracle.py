"""The oracle: answers by executing the question's program on the scene.

Right by construction, it is the sanity check of the game: its answer must never
change under a valid move, and must equal the stored answer of every real question.

A CLEVR-POC query (one that carries its environment) is answered as its item was:
the program, which names the hidden object through visible referents, becomes the
ASP query rule on the scene it is shown (`program_rule`), and brave reasoning over
the environment, the visible objects and that rule gives the set of possible values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from clevr_game.errors import InputError
from clevr_game.programs import INVALID_ANSWER, Program, reference_execute
from clevr_game.scene import Scene
from players.protocol import NEED_PROGRAM, NEED_SCENE, Answer, Player, Query, checked_answer


def _reference_on_scene(program: Program, scene: Scene) -> str:
    return reference_execute(program, scene.to_json())


def _pick_executor() -> Callable[[Program, Scene], str]:
    # The fast executor lands in clevr_game.programs.executor; until then the
    # reference executor gives the same answers, only slower.
    try:
        from clevr_game.programs.executor import execute_scene
    except ImportError:
        return _reference_on_scene
    return execute_scene


class OraclePlayer(Player):
    """Executes each query's program on its scene; needs both."""

    needs = frozenset({NEED_SCENE, NEED_PROGRAM})

    def __init__(self, name: str = "oracle") -> None:
        self.name = name
        self._execute = _pick_executor()
        self._environments: dict[str, Any] = {}  # CLEVR-POC environment text -> Environment, grounded once

    def answer_batch(self, queries: Sequence[Query]) -> list[Answer]:
        return [self._answer_one(query) for query in queries]

    def _answer_one(self, query: Query) -> Answer:
        where = f"{self.name}: query {query.item_id!r}"
        if query.program is None or query.scene is None:
            missing = "program" if query.program is None else "scene"
            return Answer.failed(query.item_id, f"{where}: no {missing} given (the oracle needs scene and program)")
        if query.environment is not None:
            return self._answer_hidden_object(query, where)
        try:
            result = self._execute(query.program, query.scene)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            # A program naming a relation or attribute the scene lacks.
            return Answer.failed(query.item_id, f"{where}: program failed on the scene: {type(exc).__name__}: {exc}")
        if result == INVALID_ANSWER:
            return Answer.failed(query.item_id, f"{where}: program has no answer on this scene (e.g. unique of a non-singleton)")
        return checked_answer(query, result, self.name)

    def _answer_hidden_object(self, query: Query, where: str) -> Answer:
        from clevr_game.asp.environment import Environment
        from clevr_game.asp.questions import program_rule
        from clevr_game.asp.solve import brave_answers

        try:
            environment = self._environments.get(query.environment)
            if environment is None:
                environment = Environment.from_text(query.environment, f"{query.item_id} environment")
                self._environments[query.environment] = environment
            rule = program_rule(query.program, query.scene)
            values = brave_answers(environment, query.scene, rule, scene_name=f"{query.item_id} scene",
                                   question_name=f"{query.item_id} rule")
        except InputError as exc:
            return Answer.failed(query.item_id, f"{where}: {exc}")
        return checked_answer(query, values, self.name)
