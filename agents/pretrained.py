"""The adversary's relation network: its own pre-trained weights, never a player's.

The file is a state-player file (players.state.checkpoint) of kind
`relation-network`, trained on question answering from the project's generated
data with a seed and data set of its own (see agents/weights/README.md), so the
adversary never shares a model with the player it attacks.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from clevr_game.errors import InputError
from clevr_game.text import WordVocabulary
from players.state.checkpoint import load_player_file
from players.state.models import StateRelationNetwork

DEFAULT_WEIGHTS = Path(__file__).resolve().parent / "weights" / "adversary-rn.pt"


def word_map(env_words: WordVocabulary, model_words: WordVocabulary) -> np.ndarray:
    """env word id -> model word id; words the model never saw map to its UNKNOWN id."""
    return np.array([model_words.ids.get(w, 1) for w in env_words.words], dtype=np.int64)


def load_adversary_network(
    path: str | os.PathLike[str] | None, env_words: WordVocabulary
) -> tuple[StateRelationNetwork, np.ndarray]:
    path = Path(path) if path else DEFAULT_WEIGHTS
    player_file = load_player_file(path)
    if player_file.kind != "relation-network":
        raise InputError(f"{path}: the adversary needs a relation-network file, this one is {player_file.kind!r}")
    network = player_file.build("cpu")
    model_words = WordVocabulary(player_file.words[2:])
    return network, word_map(env_words, model_words)
