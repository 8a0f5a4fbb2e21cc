"""Random complete scenes of an environment: answer sets drawn at random, then placed in their regions.

An answer set is drawn variable by variable: the (object, attribute-or-region)
variables are visited in a random order and each takes a value drawn uniformly
among those still consistent with the choices so far, which clingo decides by
solving under assumptions (a value the last model already shows needs no
solve). The solver itself runs with a random sign heuristic seeded from the
same generator. The result is spread over the answer sets, unlike the
solver's first models, and reproducible from the seed.
"""

from __future__ import annotations

import clingo
import numpy as np

from clevr_game.asp.clingo_io import parse_program
from clevr_game.asp.environment import Environment
from clevr_game.asp.literals import choice_literals
from clevr_game.asp.regions import NUM_REGIONS, region_zones
from clevr_game.errors import ClevrGameError
from clevr_game.layout import sample_layout
from clevr_game.scene import DEFAULT_DIRECTIONS, Scene, SceneObject, project_to_pixels
from clevr_game.vocab import ATTRIBUTES, Vocabulary

REGION_MARGIN = 0.1
"""Generated centres keep this distance from the dividing lines, so regions are unambiguous."""

_MAX_PLACEMENT_TRIES = 50


class SceneSampler:
    """Draws complete scenes that satisfy `environment`; every draw comes from `rng`."""

    def __init__(self, environment: Environment, rng: np.random.Generator) -> None:
        self.environment = environment
        self.rng = rng
        seed = int(rng.integers(0, 2**31 - 1))
        show = parse_program("#show hasProperty/3. #show at/2.", "sampler")
        self.control = environment.grounded_control(show, ["--sign-def=rnd", f"--seed={seed}", "--rand-freq=0.1"])
        n = environment.num_objects
        self.property_literals, self.region_literals = choice_literals(
            self.control, n, environment.vocabulary, environment.name
        )
        self.domain_sizes = [len(environment.vocabulary.values(a)) for a in ATTRIBUTES] + [NUM_REGIONS]
        self._value_of = {}
        for i in range(n):
            for a, attribute in enumerate(ATTRIBUTES):
                for v, value in enumerate(environment.vocabulary.values(attribute)):
                    self._value_of[("hasProperty", i, attribute, value)] = (i, a, v)
            for r in range(NUM_REGIONS):
                self._value_of[("at", i, r)] = (i, len(ATTRIBUTES), r)
        self.solves = 0

    def _literal(self, obj: int, slot: int, value: int) -> int:
        if slot < len(ATTRIBUTES):
            return int(self.property_literals[obj, slot, value])
        return int(self.region_literals[obj, value])

    def _solve(self, assumptions: list[int]) -> np.ndarray | None:
        """The (N, 5) assignment of a model under `assumptions`, or None when there is none."""
        found: list[np.ndarray] = []

        def on_model(model: clingo.Model) -> None:
            values = np.zeros((self.environment.num_objects, len(ATTRIBUTES) + 1), dtype=np.int64)
            for symbol in model.symbols(shown=True):
                args = symbol.arguments
                if symbol.name == "hasProperty":
                    key = ("hasProperty", args[0].number, args[1].name, args[2].name)
                else:
                    key = ("at", args[0].number, args[1].number)
                i, slot, v = self._value_of[key]
                values[i, slot] = v
            found.append(values)

        self.solves += 1
        self.control.solve(assumptions=assumptions, on_model=on_model)
        return found[0] if found else None

    def sample_assignment(self) -> tuple[np.ndarray, np.ndarray]:
        """One random answer set: (N, 4) value ids in ATTRIBUTES order and (N,) regions."""
        current = self._solve([])
        if current is None:
            raise ClevrGameError(f"{self.environment.name}: the environment is unsatisfiable")
        n = self.environment.num_objects
        slots = len(ATTRIBUTES) + 1
        chosen: list[int] = []
        for flat in self.rng.permutation(n * slots).tolist():
            obj, slot = divmod(flat, slots)
            for value in self.rng.permutation(self.domain_sizes[slot]).tolist():
                literal = self._literal(obj, slot, value)
                if current[obj, slot] == value:
                    chosen.append(literal)
                    break
                model = self._solve([*chosen, literal])
                if model is not None:
                    current = model
                    chosen.append(literal)
                    break
        return current[:, : len(ATTRIBUTES)].copy(), current[:, len(ATTRIBUTES)].copy()

    def sample_scene(self, image_index: int = 0, split: str = "poc") -> Scene:
        """A complete scene: a random answer set placed inside its regions under CLEVR's rules."""
        vocabulary = self.environment.vocabulary
        for _ in range(_MAX_PLACEMENT_TRIES):
            ids, regions = self.sample_assignment()
            radii = np.array([vocabulary.radius(vocabulary.sizes[s]) for s in ids[:, 0]])
            xy = sample_layout(radii, self.rng, DEFAULT_DIRECTIONS, zones=region_zones(regions, margin=REGION_MARGIN))
            if xy is None:
                continue
            scene = build_scene(ids, regions, xy, self.rng, vocabulary, image_index, split)
            # Spatial constraints (left/right/...) are unknown to the answer set; the placed scene decides.
            if not self.environment.uses_spatial or self.environment.check(scene).ok:
                return scene
        raise ClevrGameError(f"{self.environment.name}: could not place a scene in {_MAX_PLACEMENT_TRIES} tries")


def build_scene(
    ids: np.ndarray,
    regions: np.ndarray,
    xy: np.ndarray,
    rng: np.random.Generator,
    vocabulary: Vocabulary,
    image_index: int = 0,
    split: str = "poc",
) -> Scene:
    """A CLEVR scene of objects with value ids `ids` at `xy`, each carrying its `region`."""
    radii = np.array([vocabulary.radius(vocabulary.sizes[s]) for s in ids[:, 0]])
    coords = np.column_stack([xy, radii])
    rotations = rng.uniform(0.0, 360.0, len(ids))
    pixels = project_to_pixels(coords)
    objects = []
    for row, region, xyz, rotation, pixel in zip(ids.tolist(), regions.tolist(), coords, rotations, pixels, strict=True):
        values = {a: vocabulary.values(a)[v] for a, v in zip(ATTRIBUTES, row, strict=True)}
        objects.append(
            SceneObject(
                coords=(float(xyz[0]), float(xyz[1]), float(xyz[2])),
                rotation=float(rotation),
                pixel_coords=(int(pixel[0]), int(pixel[1]), float(pixel[2])),
                extra={"region": int(region)},
                **values,
            )
        )
    scene = Scene(
        objects=objects,
        directions=dict(DEFAULT_DIRECTIONS),
        vocabulary=vocabulary,
        image_index=image_index,
        image_filename=f"CLEVR_{split}_{image_index:06d}.png",
        split=split,
    )
    scene.relationships = scene.computed_relationships()
    return scene
