"""The constraint checker: ground once with labelled violations, then solve under assumptions.

Every integrity constraint `:- body.` (background and environment) becomes
`violated(K) :- body.`; a scene is passed as assumptions on the choice atoms
`hasProperty/3` and `at/2` (and on external spatial atoms when the environment
uses them), so the single model shows exactly which constraints fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import clingo
import clingo.ast as clingo_ast
import numpy as np

from clevr_game.asp.background import SPATIAL_PREDICATES
from clevr_game.asp.clingo_io import (
    MessageLog,
    add_statements,
    new_control,
    parse_program,
    run_clingo,
)
from clevr_game.asp.literals import choice_literals, literal_of
from clevr_game.asp.parsing import VIOLATED, Constraint, labelled_violations, without_unused_rules
from clevr_game.errors import InputError
from clevr_game.vocab import ATTRIBUTES, Vocabulary


@dataclass(frozen=True)
class CheckResult:
    """Whether a scene satisfies its environment; `failed` holds the broken constraints' sentences."""

    ok: bool
    failed: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.ok


class CheckedEnvironment(Protocol):
    """What the checker reads of a `clevr_game.asp.environment.Environment`, which builds its checkers here."""

    name: str
    vocabulary: Vocabulary
    num_objects: int
    uses_spatial: bool
    statements: tuple[clingo_ast.AST, ...]
    background_statements: tuple[clingo_ast.AST, ...]

    @property
    def all_constraints(self) -> tuple[Constraint, ...]: ...

_SPATIAL_EXTERNALS = " ".join(f"#external {r}(X, Y) : object(X), object(Y), X != Y." for r in SPATIAL_PREDICATES)


class ConstraintChecker:
    """One grounded Control per environment, reused for every check."""

    def __init__(self, environment: CheckedEnvironment) -> None:
        self.environment = environment
        self.n = environment.num_objects
        self.sentences = [c.sentence for c in environment.all_constraints]
        log = MessageLog()
        control = new_control(["--models=1"], log)
        # Background constraints come first, so labels follow environment.all_constraints.
        program = without_unused_rules([*environment.background_statements, *environment.statements])
        labelled = labelled_violations(program, 0)
        extra = parse_program(f"#show {VIOLATED}/1." + (_SPATIAL_EXTERNALS if environment.uses_spatial else ""), "checker")
        run_clingo(environment.name, log, lambda: add_statements(control, (*labelled, *extra)))
        run_clingo(environment.name, log, lambda: control.ground([("base", [])]))
        self.control = control
        self.attribute_literals, self.region_literals = choice_literals(
            control, self.n, environment.vocabulary, environment.name
        )
        self.spatial_literals = (
            {rel: self._pair_literals(rel) for rel in SPATIAL_PREDICATES} if environment.uses_spatial else None
        )
        for table in (self.spatial_literals or {}).values():
            # Externals default to false, which would contradict a positive assumption: leave them open.
            for literal in table[table != 0].tolist():
                control.assign_external(literal, None)
        self._violations: list[int] = []

    def _pair_literals(self, relation: str) -> np.ndarray:
        # table[a, b] is the literal of relation(a, b): "a is <relation> of b"; 0 on the diagonal.
        table = np.zeros((self.n, self.n), dtype=np.int64)
        for a in range(self.n):
            for b in range(self.n):
                if a != b:
                    symbol = clingo.Function(relation, [clingo.Number(a), clingo.Number(b)])
                    table[a, b] = literal_of(self.control, symbol, self.environment.name)
        return table

    def assumptions(
        self, attribute_ids: np.ndarray, regions: np.ndarray, relations: dict[str, np.ndarray] | None = None
    ) -> list[int]:
        """Literals fixing one scene: (N, 4) value ids and (N,) regions, already validated."""
        rows = np.arange(self.n)
        lits = self.attribute_literals[rows[:, None], np.arange(len(ATTRIBUTES))[None, :], attribute_ids]
        out = lits.ravel().tolist() + self.region_literals[rows, regions].tolist()
        if self.spatial_literals is not None:
            if relations is None:
                raise InputError(f"{self.environment.name}: the environment uses spatial relations; pass them")
            off_diagonal = ~np.eye(self.n, dtype=bool)
            for rel, table in self.spatial_literals.items():
                # relations[rel][i, j]: j is rel of i, i.e. the atom rel(j, i).
                truth = np.asarray(relations[rel], dtype=bool).T
                signed = np.where(truth, table, -table)[off_diagonal]
                out.extend(signed.tolist())
        return out

    def _on_model(self, model: clingo.Model) -> None:
        self._violations = [symbol.arguments[0].number for symbol in model.symbols(shown=True)]

    def check(
        self, attribute_ids: np.ndarray, regions: np.ndarray, relations: dict[str, np.ndarray] | None = None
    ) -> CheckResult:
        self._violations = []
        result = self.control.solve(assumptions=self.assumptions(attribute_ids, regions, relations), on_model=self._on_model)
        if not result.satisfiable:
            # Only value ids outside the choice domains can get here; they are rejected earlier.
            return CheckResult(False, ["the scene contradicts the model's domains"])
        if not self._violations:
            return CheckResult(True, [])
        return CheckResult(False, [self.sentences[k] for k in sorted(self._violations)])

    def check_many(
        self,
        attribute_ids: np.ndarray,
        regions: np.ndarray,
        relations: Sequence[dict[str, np.ndarray]] | None = None,
    ) -> list[CheckResult]:
        attribute_ids = np.asarray(attribute_ids)
        regions = np.asarray(regions)
        return [
            self.check(attribute_ids[b], regions[b], None if relations is None else relations[b])
            for b in range(attribute_ids.shape[0])
        ]


def fresh_check(environment: CheckedEnvironment, attribute_ids: np.ndarray, regions: np.ndarray) -> bool:
    """The slow reference: build, ground and solve a new program with the scene as facts.

    Used as the benchmark baseline; the environment's constraints are hard here.
    """
    vocabulary = environment.vocabulary
    facts = []
    for i, (ids, region) in enumerate(zip(np.asarray(attribute_ids).tolist(), np.asarray(regions).tolist(), strict=True)):
        for attribute, value_id in zip(ATTRIBUTES, ids, strict=True):
            facts.append(f"hasProperty({i}, {attribute}, {vocabulary.values(attribute)[value_id]}).")
        facts.append(f"at({i}, {region}).")
    control = new_control()
    add_statements(control, (*environment.background_statements, *environment.statements))
    control.add("base", [], "\n".join(facts))
    control.ground([("base", [])])
    return bool(control.solve().satisfiable)
