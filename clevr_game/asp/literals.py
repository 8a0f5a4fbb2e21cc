"""Solver literals of the choice atoms `hasProperty/3` and `at/2` in a grounded Control."""

from __future__ import annotations

import clingo
import numpy as np

from clevr_game.asp.regions import NUM_REGIONS
from clevr_game.errors import InputError
from clevr_game.vocab import ATTRIBUTES, Vocabulary


def literal_of(control: clingo.Control, symbol: clingo.Symbol, where: str) -> int:
    atom = control.symbolic_atoms[symbol]
    if atom is None:
        raise InputError(f"{where}: the grounding lacks {symbol}")
    return atom.literal


def property_symbol(obj: int, attribute: str, value: str) -> clingo.Symbol:
    return clingo.Function("hasProperty", [clingo.Number(obj), clingo.Function(attribute), clingo.Function(value)])


def region_symbol(obj: int, region: int) -> clingo.Symbol:
    return clingo.Function("at", [clingo.Number(obj), clingo.Number(region)])


def choice_literals(
    control: clingo.Control, num_objects: int, vocabulary: Vocabulary, where: str
) -> tuple[np.ndarray, np.ndarray]:
    """(N, 4, max values) literals of hasProperty (0 where a value does not exist) and (N, 4) of at."""
    width = max(len(vocabulary.values(a)) for a in ATTRIBUTES)
    properties = np.zeros((num_objects, len(ATTRIBUTES), width), dtype=np.int64)
    regions = np.zeros((num_objects, NUM_REGIONS), dtype=np.int64)
    for i in range(num_objects):
        for a, attribute in enumerate(ATTRIBUTES):
            for v, value in enumerate(vocabulary.values(attribute)):
                properties[i, a, v] = literal_of(control, property_symbol(i, attribute, value), where)
        for r in range(NUM_REGIONS):
            regions[i, r] = literal_of(control, region_symbol(i, r), where)
    return properties, regions
