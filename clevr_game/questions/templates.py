"""Question templates in the CLEVR 1.0 JSON format: loading, checking, and the facts the generator needs.

A template file is a JSON list of templates; each template has `text` (phrasings
with `<P>` placeholders and `[optional]` words), `nodes` (`type` / `inputs` /
`side_inputs`, the side inputs naming params), `params` (`name`, `type` in Size,
Color, Material, Shape, Relation) and `constraints` (NULL, NEQ, OUT_NEQ).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from clevr_game.errors import InputError
from clevr_game.programs.program import Program, parse_program
from clevr_game.vocab import ATTRIBUTES

PARAM_TYPES: dict[str, str] = {
    "Size": "size", "Color": "color", "Material": "material", "Shape": "shape", "Relation": "relation",
}
"""Template param type -> the attribute it names (or `relation`)."""

CONSTRAINT_TYPES = ("NULL", "NEQ", "OUT_NEQ")

FILTER_COMPOSITES = ("filter", "filter_unique", "filter_count", "filter_exist")
RELATE_COMPOSITES = ("relate_filter", "relate_filter_unique", "relate_filter_count", "relate_filter_exist")
COMPOSITES = FILTER_COMPOSITES + RELATE_COMPOSITES

# Value types, used to check that a template's nodes fit together before any scene is seen.
SET, OBJECT, INTEGER, BOOL = "object set", "object", "integer", "boolean"


def _signature(function: str) -> tuple[tuple[str, ...], str]:
    """(input types, output type) of a template or primitive function."""
    if function in COMPOSITES:
        source = OBJECT if function.startswith("relate") else SET
        tail = function.rsplit("_", 1)[-1]
        output = {"unique": OBJECT, "count": INTEGER, "exist": BOOL}.get(tail, SET)
        return (source,), output
    if function == "scene":
        return (), SET
    if function in ("union", "intersect"):
        return (SET, SET), SET
    if function == "unique":
        return (SET,), OBJECT
    if function == "relate":
        return (OBJECT,), SET
    if function == "count":
        return (SET,), INTEGER
    if function == "exist":
        return (SET,), BOOL
    if function in ("equal_integer", "less_than", "greater_than"):
        return (INTEGER, INTEGER), BOOL
    if function == "equal_object":
        return (OBJECT, OBJECT), BOOL
    prefix, _, attribute = function.partition("_")
    if prefix == "filter":
        return (SET,), SET
    if prefix == "query":
        return (OBJECT,), attribute
    if prefix == "same":
        return (OBJECT,), SET
    if prefix == "equal":
        return (attribute, attribute), BOOL
    raise ValueError(f"no signature for {function!r}")


def output_type(function: str) -> str:
    """What a template or primitive function gives: SET, OBJECT, INTEGER, BOOL or an attribute name."""
    return _signature(function)[1]


def _side_input_types(function: str) -> tuple[str, ...]:
    """The param types a node's side inputs must have, in order."""
    attributes = tuple(a.capitalize() for a in ATTRIBUTES)
    if function in FILTER_COMPOSITES:
        return attributes
    if function in RELATE_COMPOSITES:
        return ("Relation",) + attributes
    if function == "relate":
        return ("Relation",)
    if function.startswith("filter_"):
        return (function[7:].capitalize(),)
    return ()


@dataclass(frozen=True)
class Constraint:
    kind: str
    """NULL (param stays empty), NEQ (two params differ), OUT_NEQ (two nodes select different objects)."""
    params: tuple[Any, ...]
    """Param names for NULL and NEQ, template node indices for OUT_NEQ."""


@dataclass(frozen=True)
class Template:
    texts: tuple[str, ...]
    nodes: Program
    """Template-form nodes: `value_inputs` hold param names."""
    params: dict[str, str]
    """Param name -> attribute (size, color, material, shape) or `relation`, in declaration order."""
    constraints: tuple[Constraint, ...]
    filename: str
    index_in_file: int
    family_index: int
    """Position in the sorted-by-filename, in-file-order listing it was loaded with."""

    @property
    def family(self) -> str:
        """`zero_hop` for `zero_hop.json`."""
        return self.filename.rsplit(".", 1)[0]

    @property
    def null_params(self) -> frozenset[str]:
        return frozenset(c.params[0] for c in self.constraints if c.kind == "NULL")

    @property
    def answer_type(self) -> str:
        """`boolean`, `integer`, or an attribute name."""
        return _signature(self.nodes[-1].function)[1]


_PLACEHOLDER = re.compile(r"<[^<>\s]*>")


def parse_template(data: Any, filename: str, index: int, family_index: int) -> Template:
    """One template dict -> Template; InputError names file, template index and field."""
    at = f"{filename}: template {index}"
    if not isinstance(data, dict):
        raise InputError(f"{at}: expected a template (JSON dict), got {type(data).__name__}")
    for key in ("text", "nodes", "params"):
        if key not in data:
            raise InputError(f"{at}, field '{key}': missing")
    texts = data["text"]
    if not isinstance(texts, list) or not texts or any(not isinstance(t, str) or not t.strip() for t in texts):
        raise InputError(f"{at}, field 'text': must be a non-empty list of non-empty strings")
    params = _parse_params(data["params"], at)
    nodes = parse_program(data["nodes"], f"{at}, field 'nodes': ")
    _check_nodes(nodes, params, at)
    for text in texts:
        for placeholder in _PLACEHOLDER.findall(text):
            if placeholder not in params:
                raise InputError(f"{at}, field 'text': placeholder {placeholder} is not a declared param")
    constraints = _parse_constraints(data.get("constraints", []), params, len(nodes), at)
    return Template(tuple(texts), nodes, params, constraints, filename, index, family_index)


def _parse_params(raw: Any, at: str) -> dict[str, str]:
    where = f"{at}, field 'params'"
    if not isinstance(raw, list):
        raise InputError(f"{where}: must be a list of {{name, type}} dicts")
    params: dict[str, str] = {}
    for i, param in enumerate(raw):
        if not isinstance(param, dict) or not isinstance(param.get("name"), str):
            raise InputError(f"{where}: param {i} must be a dict with a string 'name'")
        name, kind = param["name"], param.get("type")
        if kind not in PARAM_TYPES:
            raise InputError(f"{where}: param {name} has type {kind!r} (expected one of {', '.join(PARAM_TYPES)})")
        if name in params:
            raise InputError(f"{where}: param {name} is declared twice")
        params[name] = PARAM_TYPES[kind]
    return params


def _check_nodes(nodes: Program, params: dict[str, str], at: str) -> None:
    where = f"{at}, field 'nodes'"
    used: set[str] = set()
    outputs: list[str] = []
    for i, node in enumerate(nodes):
        expected = _side_input_types(node.function)
        if len(node.value_inputs) != len(expected):
            raise InputError(
                f"{where}: node {i} ({node.function}) takes {len(expected)} side inputs, got {len(node.value_inputs)}"
            )
        for name, kind in zip(node.value_inputs, expected, strict=True):
            if name not in params:
                raise InputError(f"{where}: node {i} side input {name!r} is not a declared param")
            if params[name] != PARAM_TYPES[kind]:
                raise InputError(f"{where}: node {i} side input {name} must be of type {kind}")
            if name in used:
                raise InputError(f"{where}: param {name} is used by more than one node")
            used.add(name)
        inputs, output = _signature(node.function)
        for position, (source, kind) in enumerate(zip(node.inputs, inputs, strict=True)):
            if outputs[source] != kind:
                raise InputError(
                    f"{where}: node {i} ({node.function}) expects {kind} as input {position}, "
                    f"node {source} gives {outputs[source]}"
                )
        outputs.append(output)
    if outputs[-1] in (SET, OBJECT):
        raise InputError(f"{where}: the last node ({nodes[-1].function}) gives {outputs[-1]}, not an answer")
    unused = [name for name in params if name not in used]
    if unused:
        raise InputError(f"{at}, field 'params': param {unused[0]} is used by no node")


def _parse_constraints(raw: Any, params: dict[str, str], num_nodes: int, at: str) -> tuple[Constraint, ...]:
    where = f"{at}, field 'constraints'"
    if not isinstance(raw, list):
        raise InputError(f"{where}: must be a list")
    constraints = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or item.get("type") not in CONSTRAINT_TYPES:
            raise InputError(f"{where}: constraint {i} must have a type in {', '.join(CONSTRAINT_TYPES)}")
        kind, values = item["type"], item.get("params")
        size = 1 if kind == "NULL" else 2
        if not isinstance(values, list) or len(values) != size:
            raise InputError(f"{where}: constraint {i} ({kind}) takes {size} params, got {values!r}")
        if kind == "OUT_NEQ":
            if any(isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < num_nodes for v in values):
                raise InputError(f"{where}: constraint {i} (OUT_NEQ) params must be node indices, got {values!r}")
        else:
            for v in values:
                if v not in params:
                    raise InputError(f"{where}: constraint {i} ({kind}) names undeclared param {v!r}")
            if kind == "NULL" and params[values[0]] == "relation":
                raise InputError(f"{where}: constraint {i} (NULL) cannot apply to relation {values[0]}")
        constraints.append(Constraint(kind, tuple(values)))
    return tuple(constraints)


def _read_template_file(path: Path, first_index: int) -> list[Template]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path.name}: not valid JSON ({exc})".replace("\n", " ")) from None
    if not isinstance(data, list):
        raise InputError(f"{path.name}: expected a JSON list of templates, got {type(data).__name__}")
    return [parse_template(t, path.name, i, first_index + i) for i, t in enumerate(data)]


def load_templates(path: str | Path) -> list[Template]:
    """Templates of one file, or of every `*.json` in a folder (sorted by file name, in-file order).

    `family_index` is each template's position in that listing.
    """
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".json" and p.is_file())
        if not files:
            raise InputError(f"{path}: no template files (*.json) in this folder")
    elif path.is_file():
        files = [path]
    else:
        raise InputError(f"{path}: no such file or folder")
    templates: list[Template] = []
    for file in files:
        templates.extend(_read_template_file(file, len(templates)))
    return templates


DEFAULT_TEMPLATE_DIR = Path(__file__).resolve().parents[1] / "data" / "templates"


def default_templates() -> list[Template]:
    """The project's own templates (clevr_game/data/templates), all nine CLEVR families."""
    return load_templates(DEFAULT_TEMPLATE_DIR)


TEMPLATE_SETS = ("own", "clevr", "both")
"""`own`: the project's templates; `clevr`: CLEVR 1.0's (shipped, or a user's copy by path); `both`."""


def default_sampling(choice: str | None) -> str:
    """The sampling a template set gets unless told: CLEVR's distribution for CLEVR's templates
    (`clevr`, `both`), `minimal` for the project's own and for templates given by path."""
    return "clevr" if choice in ("clevr", "both") else "minimal"


def choose_templates(choice: str | None, clevr_dir: str | Path | None = None) -> list[Template]:
    """Templates by set name (see TEMPLATE_SETS) or by path; `both` numbers CLEVR's families after the own ones."""
    if choice is None or choice == "own":
        return default_templates()
    if choice not in TEMPLATE_SETS:
        return load_templates(choice)
    if clevr_dir is None:  # the copy shipped in the package (BSD, clevr-dataset-gen)
        from clevr_game.datafiles import CLEVR_TEMPLATE_DIR

        clevr_dir = CLEVR_TEMPLATE_DIR
    clevr = load_templates(clevr_dir)
    if choice == "clevr":
        return clevr
    own = default_templates()
    return own + [replace(t, family_index=len(own) + t.family_index) for t in clevr]
