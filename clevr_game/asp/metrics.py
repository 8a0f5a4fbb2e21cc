"""Scores for set-valued answers: exact accuracy and the Jaccard index."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from clevr_game.errors import InputError


def jaccard(pred: Iterable[str], true: Iterable[str]) -> float:
    """|pred & true| / |pred | true|; two empty sets agree perfectly (1.0)."""
    predicted, expected = set(pred), set(true)
    union = predicted | expected
    return len(predicted & expected) / len(union) if union else 1.0


def _paired(pred_sets: Sequence[Iterable[str]], true_sets: Sequence[Iterable[str]]) -> list[tuple[set, set]]:
    if len(pred_sets) != len(true_sets):
        raise InputError(f"{len(pred_sets)} predicted answers for {len(true_sets)} items")
    return [(set(p), set(t)) for p, t in zip(pred_sets, true_sets, strict=True)]


def exact_accuracy(pred_sets: Sequence[Iterable[str]], true_sets: Sequence[Iterable[str]]) -> float:
    """Share of items whose predicted set equals the true set (0.0 for no items)."""
    pairs = _paired(pred_sets, true_sets)
    return sum(p == t for p, t in pairs) / len(pairs) if pairs else 0.0


def mean_jaccard(pred_sets: Sequence[Iterable[str]], true_sets: Sequence[Iterable[str]]) -> float:
    """Mean Jaccard index over items (0.0 for no items)."""
    pairs = _paired(pred_sets, true_sets)
    return sum(jaccard(p, t) for p, t in pairs) / len(pairs) if pairs else 0.0
