"""A numpy check equivalent to the clingo checker for environments made of template constraints.

Each object is coded as one integer over (region, size, color, material, shape).
A unary constraint is "the number of objects whose code lies in a set is within
[lo, hi]" (a boolean table over codes); a pair constraint counts pairs of
objects, the first in one code set and the second in another, that agree (or
disagree) on an attribute. Every template and both background constraints
compile to one of the two; tests cross-validate the verdicts against clingo.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clevr_game.asp.background import BACKGROUND_CONSTRAINTS, MAX_PER_REGION
from clevr_game.asp.regions import NUM_REGIONS
from clevr_game.asp.templates import ConstraintSpec
from clevr_game.vocab import ATTRIBUTES, Vocabulary

UNBOUNDED = 1 << 30
ALL_ATTRIBUTES = len(ATTRIBUTES)  # pair-row attribute index meaning "all four agree"


@dataclass
class _Rows:
    masks: list[np.ndarray]
    lo: list[int]
    hi: list[int]
    labels: list[int]


class _Grid:
    """Region and attribute value of every object code."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.vocabulary = vocabulary
        self.shape = (NUM_REGIONS, *(len(vocabulary.values(a)) for a in ATTRIBUTES))
        axes = np.indices(self.shape).reshape(len(self.shape), -1)
        self.region = axes[0]
        self.attribute = {a: axes[1 + k] for k, a in enumerate(ATTRIBUTES)}
        self.size = int(np.prod(self.shape))
        self.everything = np.ones(self.size, dtype=bool)
        # code = region * strides[0] + sum_k ids[k] * strides[k + 1]
        self.strides = np.array([int(np.prod(self.shape[k + 1 :])) for k in range(len(self.shape))], dtype=np.int64)

    def has(self, attribute: str, value: str) -> np.ndarray:
        return self.attribute[attribute] == self.vocabulary.index(attribute, value)

    def filtered(self, params: dict) -> np.ndarray:
        if params.get("attribute2") is None:
            return self.everything
        return self.has(params["attribute2"], params["value2"])


class CompiledChecker:
    """Vectorised verdicts for background + template constraints; labels follow Environment.all_constraints."""

    def __init__(self, vocabulary: Vocabulary, specs: list[ConstraintSpec], sentences: list[str]) -> None:
        self.grid = grid = _Grid(vocabulary)
        self.sentences = sentences
        unary = _Rows([], [], [], [])
        pair = _Rows([], [], [], [])
        self._pair_second: list[np.ndarray] = []
        self._pair_attribute: list[int] = []
        self._pair_same: list[bool] = []
        self._pair_unordered: list[bool] = []

        def add_unary(mask: np.ndarray, lo: int, hi: int, label: int) -> None:
            unary.masks.append(mask)
            unary.lo.append(lo)
            unary.hi.append(hi)
            unary.labels.append(label)

        def add_pair(first: np.ndarray, second: np.ndarray, attribute: int, same: bool,
                     unordered: bool, lo: int, hi: int, label: int) -> None:
            pair.masks.append(first)
            self._pair_second.append(second)
            self._pair_attribute.append(attribute)
            self._pair_same.append(same)
            self._pair_unordered.append(unordered)
            pair.lo.append(lo)
            pair.hi.append(hi)
            pair.labels.append(label)

        for label, kind in enumerate(BACKGROUND_CONSTRAINTS):
            if kind == "distinct_objects":
                add_pair(grid.everything, grid.everything, ALL_ATTRIBUTES, True, True, 0, 0, label)
            elif kind == "region_capacity":
                for region in range(NUM_REGIONS):
                    add_unary(grid.region == region, 0, MAX_PER_REGION, label)
        for offset, spec in enumerate(specs):
            label = len(BACKGROUND_CONSTRAINTS) + offset
            p = spec.params
            name = spec.template
            if name == "same_in_region":
                here = grid.region == p["region"]
                add_pair(here, here, ATTRIBUTES.index(p["attribute"]), False, True, 0, 0, label)
                continue
            if name in ("at_least_pairs", "at_most_pairs"):
                keep = grid.filtered(p)
                first = (grid.region == p["region"]) & keep
                second = (grid.region == p["region2"]) & keep
                lo, hi = (p["n"], UNBOUNDED) if name == "at_least_pairs" else (0, p["n"])
                add_pair(first, second, ATTRIBUTES.index(p["attribute"]), True,
                         p["region"] == p["region2"], lo, hi, label)
                continue
            mask, lo, hi = self._unary_rule(name, p)
            add_unary(mask, lo, hi, label)

        self.num_labels = len(sentences)
        # Tables are indexed by object code first, so one fancy index serves the whole batch.
        self.unary_table = np.array(unary.masks, dtype=bool).reshape(-1, grid.size).T  # (C, K)
        self.unary_lo = np.array(unary.lo, dtype=np.int64)
        self.unary_hi = np.array(unary.hi, dtype=np.int64)
        self.unary_labels = self._one_hot(unary.labels)
        self.pair_first = np.array(pair.masks, dtype=bool).reshape(-1, grid.size).T  # (C, P)
        self.pair_second = np.array(self._pair_second, dtype=bool).reshape(-1, grid.size).T
        self.pair_attribute = np.array(self._pair_attribute, dtype=np.int64)
        self.pair_same = np.array(self._pair_same, dtype=bool)
        self.pair_divisor = np.where(self._pair_unordered, 2, 1)
        self.pair_lo = np.array(pair.lo, dtype=np.int64)
        self.pair_hi = np.array(pair.hi, dtype=np.int64)
        self.pair_labels = self._one_hot(pair.labels)
        self._distinct: dict[int, np.ndarray] = {}  # n -> (N, N, 1) off-diagonal mask
        self._prepare_single(unary.labels, pair.labels)

    def _prepare_single(self, unary_labels: list[int], pair_labels: list[int]) -> None:
        # Plain-Python tables for one scene at a time: numpy's per-call overhead dominates at N <= 10.
        self._strides = self.grid.strides.tolist()
        self._unary_hits = [tuple(np.flatnonzero(row).tolist()) for row in self.unary_table]
        self._unary_bounds = list(zip(self.unary_lo.tolist(), self.unary_hi.tolist(), unary_labels, strict=True))
        first, second = self.pair_first.tolist(), self.pair_second.tolist()
        self._pair_rows = [
            (p, attribute, same, divisor, lo, hi, label, [row[p] for row in first], [row[p] for row in second])
            for p, (attribute, same, divisor, lo, hi, label) in enumerate(
                zip(self.pair_attribute.tolist(), self.pair_same.tolist(), self.pair_divisor.tolist(),
                    self.pair_lo.tolist(), self.pair_hi.tolist(), pair_labels, strict=True)
            )
        ]

    def violated_labels(self, attribute_ids: list[list[int]], regions: list[int]) -> list[int]:
        """One scene as plain lists -> sorted labels of the failing constraints.

        Pair counts are O(N) per constraint: ordered pairs (i in first, j in second, i != j)
        that agree on a value number sum_v first_v * second_v minus the objects in both sets.
        """
        strides = self._strides
        codes = []
        keys = []
        for values, region in zip(attribute_ids, regions, strict=True):
            codes.append(region * strides[0] + values[0] * strides[1] + values[1] * strides[2]
                          + values[2] * strides[3] + values[3] * strides[4])
            keys.append((*values, tuple(values)))
        counts = [0] * len(self._unary_bounds)
        for code in codes:
            for k in self._unary_hits[code]:
                counts[k] += 1
        broken = {label for (lo, hi, label), count in zip(self._unary_bounds, counts, strict=True)
                  if count < lo or count > hi}
        for _, attribute, same, divisor, lo, hi, label, first, second in self._pair_rows:
            firsts: dict = {}
            seconds: dict = {}
            both = total_first = total_second = 0
            for code, key in zip(codes, keys, strict=True):
                in_first, in_second = first[code], second[code]
                value = key[attribute]
                if in_first:
                    firsts[value] = firsts.get(value, 0) + 1
                    total_first += 1
                if in_second:
                    seconds[value] = seconds.get(value, 0) + 1
                    total_second += 1
                both += in_first and in_second
            agreeing = sum(count * seconds.get(value, 0) for value, count in firsts.items()) - both
            pairs = agreeing if same else total_first * total_second - both - agreeing
            pairs //= divisor
            if pairs < lo or pairs > hi:
                broken.add(label)
        return sorted(broken)

    def _one_hot(self, labels: list[int]) -> np.ndarray:
        table = np.zeros((len(labels), self.num_labels), dtype=np.int64)
        table[np.arange(len(labels)), labels] = 1
        return table

    def _unary_rule(self, name: str, p: dict) -> tuple[np.ndarray, int, int]:
        grid = self.grid
        if name == "global_ban":
            return grid.has(p["attribute"], p["value"]), 0, 0
        here = grid.region == p["region"]
        has = grid.has(p["attribute"], p["value"])
        if name == "all_in_region":
            return here & ~has, 0, 0
        if name == "none_in_region":
            return here & has, 0, 0
        if name == "either_or":
            return here & ~has & ~grid.has(p["attribute"], p["value2"]), 0, 0
        if name == "implication":
            return here & grid.has(p["attribute2"], p["value2"]) & ~has, 0, 0
        bounds = {"exactly_n": (p.get("n"), p.get("n")), "at_least_n": (p.get("n"), UNBOUNDED),
                  "at_most_n": (0, p.get("n"))}
        lo, hi = bounds[name]
        return here & has, lo, hi

    def violations(self, attribute_ids: np.ndarray, regions: np.ndarray) -> np.ndarray:
        """(B, N, 4) value ids and (B, N) regions -> (B, L) bool: constraint L fails on scene B."""
        ids = attribute_ids
        n = regions.shape[1]
        codes = regions * self.grid.strides[0] + ids @ self.grid.strides[1:]  # (B, N)
        counts = self.unary_table[codes].sum(axis=1)  # (B, K)
        broken = ((counts < self.unary_lo) | (counts > self.unary_hi)) @ self.unary_labels
        if self.pair_attribute.size:
            off_diagonal = self._distinct.get(n)
            if off_diagonal is None:
                off_diagonal = self._distinct[n] = ~np.eye(n, dtype=bool)[:, :, None]
            equal = ids[:, :, None, :] == ids[:, None, :, :]  # (B, N, N, 4)
            agree = np.concatenate([equal, equal.all(-1, keepdims=True)], axis=-1)[..., self.pair_attribute]
            related = (agree == self.pair_same) & off_diagonal  # (B, N, N, P)
            first = self.pair_first[codes]  # (B, N, P)
            second = self.pair_second[codes]
            pairs = (first[:, :, None, :] & second[:, None, :, :] & related).sum(axis=(1, 2)) // self.pair_divisor
            broken = broken + ((pairs < self.pair_lo) | (pairs > self.pair_hi)) @ self.pair_labels
        return broken > 0
