"""An environment: the background plus one `.lp` of constraints, grounded once, checked fast.

    env = Environment.load("env_000.lp")
    result = env.check(scene)          # CheckResult(ok, failed=[English sentences])
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import clingo
import clingo.ast as clingo_ast
import numpy as np

from clevr_game.asp.background import MAX_PER_REGION, background_program
from clevr_game.asp.checker import CheckResult, ConstraintChecker
from clevr_game.asp.clingo_io import (
    MessageLog,
    add_statements,
    new_control,
    parse_program,
    run_clingo,
)
from clevr_game.asp.parsing import (
    Constraint,
    constraints_of,
    is_integrity_constraint,
    parse_environment,
)
from clevr_game.asp.regions import NUM_REGIONS, regions_of
from clevr_game.asp.templates import ConstraintSpec, match_constraint
from clevr_game.errors import InputError
from clevr_game.scene import Scene
from clevr_game.vocab import ATTRIBUTES, CLEVR_POC, Vocabulary

if TYPE_CHECKING:
    from clevr_game.asp.compiled import CompiledChecker


class Environment:
    """Background + environment constraints over `num_objects` objects (CLEVR-POC vocabulary)."""

    def __init__(
        self, text: str, name: str, vocabulary: Vocabulary = CLEVR_POC, *, check_satisfiable: bool = True
    ) -> None:
        self.name = name
        self.text = text
        self.vocabulary = vocabulary
        parsed = parse_environment(text, name, vocabulary)
        self.statements: tuple[clingo_ast.AST, ...] = parsed.statements
        self.constraints: tuple[Constraint, ...] = parsed.constraints
        self.uses_spatial = parsed.uses_spatial
        self._helper_rules = parsed.helper_rules
        self._limits = [len(vocabulary.values(a)) for a in ATTRIBUTES]
        self._value_counts = np.array(self._limits, dtype=np.int64)
        background = background_program(vocabulary)
        self.background_statements = tuple(parse_program(background, "background"))
        self.background_constraints = constraints_of(self.background_statements, background, "background")
        self.num_objects = self._count_objects(check_satisfiable)

    # ------------------------------------------------------------ construction

    @classmethod
    def from_text(cls, text: str, name: str = "<environment>", *, check_satisfiable: bool = True) -> Environment:
        return cls(text, name, check_satisfiable=check_satisfiable)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, check_satisfiable: bool = True) -> Environment:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError(f"{path}: no such file") from None
        except UnicodeDecodeError:
            raise InputError(f"{path}: not UTF-8 text") from None
        return cls(text, str(path), check_satisfiable=check_satisfiable)

    def grounded_control(self, extra: Sequence[clingo_ast.AST] = (), arguments: Sequence[str] = ()) -> clingo.Control:
        """A fresh Control with the background, the environment (constraints hard) and `extra`, grounded."""
        log = MessageLog()
        control = new_control(arguments, log)
        run_clingo(self.name, log, lambda: add_statements(control, (*self.background_statements, *self.statements, *extra)))
        run_clingo(self.name, log, lambda: control.ground([("base", [])]))
        return control

    def _count_objects(self, check_satisfiable: bool) -> int:
        # Count objects on the environment's own rules first: grounding the background for
        # a typo like `object(0..100000)` would take very long before failing anyway.
        log = MessageLog()
        counting = new_control((), log)
        rules = [s for s in self.statements if not is_integrity_constraint(s)]
        run_clingo(self.name, log, lambda: add_statements(counting, rules))
        run_clingo(self.name, log, lambda: counting.ground([("base", [])]))
        ids = sorted(atom.symbol.arguments[0] for atom in counting.symbolic_atoms.by_signature("object", 1))
        if not ids or any(s.type != clingo.SymbolType.Number for s in ids):
            raise InputError(f"{self.name}: objects must be numbered 0..N-1 (e.g. `object(0..7).`)")
        numbers = [s.number for s in ids]
        if numbers != list(range(len(numbers))):
            shown = ", ".join(map(str, numbers[:6])) + (", ..." if len(numbers) > 6 else "")
            raise InputError(f"{self.name}: objects must be numbered 0..N-1, got {shown}")
        capacity = NUM_REGIONS * MAX_PER_REGION
        if len(numbers) > capacity:
            raise InputError(
                f"{self.name}: {len(numbers)} objects cannot fit: at most {capacity} ({MAX_PER_REGION} per region)"
            )
        control = self.grounded_control()
        if check_satisfiable and not control.solve().satisfiable:
            raise InputError(
                f"{self.name}: the environment is unsatisfiable: no scene of {len(numbers)} objects meets all its constraints"
            )
        return len(numbers)

    # ------------------------------------------------------------ checking

    @cached_property
    def templates(self) -> list[ConstraintSpec] | None:
        """The template instance of every constraint, or None when some constraint is not in template form."""
        if self._helper_rules or self.uses_spatial:
            return None
        specs = [match_constraint(c.asp, self.vocabulary) for c in self.constraints]
        return None if any(s is None for s in specs) else specs  # type: ignore[return-value]

    @cached_property
    def _compiled(self) -> CompiledChecker | None:
        from clevr_game.asp.compiled import CompiledChecker

        if self.templates is None:
            return None
        return CompiledChecker(self.vocabulary, self.templates, [c.sentence for c in self.all_constraints])

    @cached_property
    def _clingo(self) -> ConstraintChecker:
        return ConstraintChecker(self)

    @property
    def check_method(self) -> str:
        """"compiled" when every constraint is a template (numpy check), else "clingo" (assumptions)."""
        return "compiled" if self._compiled is not None else "clingo"

    @property
    def all_constraints(self) -> tuple[Constraint, ...]:
        """Background constraints first, then the environment's: the checker's label order."""
        return self.background_constraints + self.constraints

    @property
    def sentences(self) -> list[str]:
        """The environment's constraints in English, in file order."""
        return [c.sentence for c in self.constraints]

    def attribute_ids(self, scene: Scene) -> np.ndarray:
        """(N, 4) value ids of a scene's objects against this environment's vocabulary."""
        try:
            return np.array(
                [[self.vocabulary.index(a, o.attribute(a)) for a in ATTRIBUTES] for o in scene.objects],
                dtype=np.int64,
            ).reshape(-1, len(ATTRIBUTES))
        except ValueError as exc:
            raise InputError(f"{self.name}: {exc}") from None

    def check(self, scene: Scene, regions: np.ndarray | None = None, *, method: str = "auto") -> CheckResult:
        """Does a complete scene satisfy the environment? Regions follow from coordinates unless given."""
        if regions is None:
            regions = regions_of(scene.coords(), scene.directions)
        relations = scene.relation_matrices() if self.uses_spatial else None
        return self.check_ids(self.attribute_ids(scene), regions, relations, method=method)

    def check_ids(
        self,
        attribute_ids: np.ndarray,
        regions: np.ndarray,
        relations: dict[str, np.ndarray] | None = None,
        *,
        method: str = "auto",
    ) -> CheckResult:
        """Check one assignment: (N, 4) value ids in ATTRIBUTES order and (N,) regions 0..3.

        `relations` (rel -> (N, N) bool, as scene.relation_matrices) is needed only when
        the environment mentions left/right/front/behind. `method` is "auto", "compiled"
        or "clingo" (solving the once-grounded program under assumptions).
        """
        if self._use_compiled(method):
            ids_list, regions_list = self._validated_lists(attribute_ids, regions)
            labels = self._compiled.violated_labels(ids_list, regions_list)
            if not labels:
                return CheckResult(True, [])
            return CheckResult(False, [self._compiled.sentences[k] for k in labels])
        attribute_ids, regions = self._validated(attribute_ids, regions, batched=False)
        return self._clingo.check(attribute_ids, regions, relations)

    def check_many(
        self,
        attribute_ids: np.ndarray,
        regions: np.ndarray,
        relations: Sequence[dict[str, np.ndarray]] | None = None,
        *,
        method: str = "auto",
    ) -> list[CheckResult]:
        """Check a batch: (B, N, 4) value ids and (B, N) regions."""
        attribute_ids, regions = self._validated(attribute_ids, regions, batched=True)
        if self._use_compiled(method):
            return self._results(self._compiled.violations(attribute_ids, regions))
        return self._clingo.check_many(attribute_ids, regions, relations)

    def satisfied(self, attribute_ids: np.ndarray, regions: np.ndarray) -> np.ndarray:
        """(B,) bool verdicts for a batch, without sentences (compiled when possible)."""
        attribute_ids, regions = self._validated(attribute_ids, regions, batched=True)
        if self._use_compiled("auto"):
            return ~self._compiled.violations(attribute_ids, regions).any(axis=1)
        return np.array([r.ok for r in self._clingo.check_many(attribute_ids, regions)], dtype=bool)

    # ------------------------------------------------------------ helpers

    def _use_compiled(self, method: str) -> bool:
        if method not in ("auto", "compiled", "clingo"):
            raise ValueError(f"unknown check method {method!r} (expected auto, compiled or clingo)")
        if method == "compiled" and self._compiled is None:
            raise InputError(f"{self.name}: not every constraint is in template form; use the clingo check")
        return method != "clingo" and self._compiled is not None

    def _validated(self, attribute_ids: np.ndarray, regions: np.ndarray, *, batched: bool) -> tuple[np.ndarray, np.ndarray]:
        ids = np.asarray(attribute_ids, dtype=np.int64)
        regions = np.asarray(regions, dtype=np.int64)
        if ids.ndim != (3 if batched else 2) or ids.shape[-2:] != (self.num_objects, len(ATTRIBUTES)):
            raise InputError(
                f"{self.name}: the scene has {ids.shape[-2] if ids.ndim >= 2 else 0} objects, "
                f"the environment {self.num_objects}"
            )
        if regions.shape != ids.shape[:-1]:
            raise InputError(f"{self.name}: regions must have shape {ids.shape[:-1]}, got {regions.shape}")
        if ids.size and (ids.min() < 0 or (ids >= self._value_counts).any()):
            raise InputError(f"{self.name}: attribute value id out of range")
        if regions.size and (regions.min() < 0 or regions.max() >= NUM_REGIONS):
            raise InputError(f"{self.name}: region outside 0..{NUM_REGIONS - 1}")
        return ids, regions

    def _validated_lists(self, attribute_ids: np.ndarray, regions: np.ndarray) -> tuple[list, list]:
        ids = attribute_ids.tolist() if isinstance(attribute_ids, np.ndarray) else [list(r) for r in attribute_ids]
        regions = regions.tolist() if isinstance(regions, np.ndarray) else list(regions)
        limits = self._limits
        if len(ids) != self.num_objects or len(regions) != self.num_objects:
            raise InputError(f"{self.name}: the scene has {len(ids)} objects, the environment {self.num_objects}")
        for values, region in zip(ids, regions, strict=True):
            if len(values) != len(limits) or not all(0 <= v < m for v, m in zip(values, limits, strict=True)):
                raise InputError(f"{self.name}: attribute value ids {values} out of range")
            if not 0 <= region < NUM_REGIONS:
                raise InputError(f"{self.name}: region {region} outside 0..{NUM_REGIONS - 1}")
        return ids, regions

    def _results(self, broken: np.ndarray) -> list[CheckResult]:
        sentences = self._compiled.sentences
        return [
            CheckResult(True, []) if not row.any() else CheckResult(False, [sentences[k] for k in np.flatnonzero(row)])
            for row in broken
        ]
