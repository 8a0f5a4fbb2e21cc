"""Attribute values of the two worlds: CLEVR 1.0 and the CLEVR-POC extension.

Attribute order everywhere (ids, arrays, template side inputs) is CLEVR's
filter order: size, color, material, shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ATTRIBUTES: tuple[str, ...] = ("size", "color", "material", "shape")
RELATIONS: tuple[str, ...] = ("left", "right", "behind", "front")

COLOR_RGB: dict[str, tuple[int, int, int]] = {
    "gray": (87, 87, 87),
    "red": (173, 35, 35),
    "blue": (42, 75, 215),
    "green": (29, 105, 20),
    "brown": (129, 74, 25),
    "purple": (129, 38, 192),
    "cyan": (41, 208, 208),
    "yellow": (255, 238, 51),
}


@dataclass(frozen=True)
class Vocabulary:
    """The attribute values a scene may use, with object radii per size."""

    name: str
    sizes: tuple[str, ...]
    colors: tuple[str, ...]
    materials: tuple[str, ...]
    shapes: tuple[str, ...]
    size_radius: dict[str, float] = field(hash=False, compare=False)

    def values(self, attribute: str) -> tuple[str, ...]:
        """Allowed values of `attribute` (one of ATTRIBUTES)."""
        try:
            return {
                "size": self.sizes,
                "color": self.colors,
                "material": self.materials,
                "shape": self.shapes,
            }[attribute]
        except KeyError:
            raise KeyError(f"unknown attribute {attribute!r} (expected one of {', '.join(ATTRIBUTES)})") from None

    def index(self, attribute: str, value: str) -> int:
        """Position of `value` among the values of `attribute`; ValueError if unknown."""
        values = self.values(attribute)
        try:
            return values.index(value)
        except ValueError:
            raise ValueError(
                f"unknown {attribute} {value!r} (expected one of {', '.join(values)})"
            ) from None

    def radius(self, size: str) -> float:
        return self.size_radius[size]

    @property
    def answer_values(self) -> tuple[str, ...]:
        """Every answer a CLEVR question over this vocabulary can have."""
        return (
            ("yes", "no")
            + tuple(str(i) for i in range(11))
            + self.sizes
            + self.colors
            + self.materials
            + self.shapes
        )


CLEVR = Vocabulary(
    name="clevr",
    sizes=("small", "large"),
    colors=tuple(COLOR_RGB),
    materials=("rubber", "metal"),
    shapes=("cube", "sphere", "cylinder"),
    size_radius={"small": 0.35, "large": 0.7},
)

# CLEVR-POC adds a cone and a medium size between CLEVR's two.
CLEVR_POC = Vocabulary(
    name="clevr-poc",
    sizes=("small", "medium", "large"),
    colors=tuple(COLOR_RGB),
    materials=("rubber", "metal"),
    shapes=("cube", "sphere", "cylinder", "cone"),
    size_radius={"small": 0.35, "medium": 0.5, "large": 0.7},
)

VOCABULARIES: dict[str, Vocabulary] = {v.name: v for v in (CLEVR, CLEVR_POC)}

SET_SEPARATOR = ","
"""Joins the values of a set answer in its canonical text."""

SET_ANSWER_VOCABULARIES: frozenset[str] = frozenset({CLEVR_POC.name})
"""Vocabularies whose questions have set answers (CLEVR-POC's hidden-object questions)."""


def get_vocabulary(name: str) -> Vocabulary:
    try:
        return VOCABULARIES[name]
    except KeyError:
        raise ValueError(
            f"unknown vocabulary {name!r} (expected one of {', '.join(VOCABULARIES)})"
        ) from None
