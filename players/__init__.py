"""Visual-QA players seen as black boxes: the protocol, the oracle, subprocess and HTTP players.

A player never imports an environment; the game talks to it only through
`Player.answer_batch`.
"""

from players.http_player import HttpPlayer
from players.oracle import OraclePlayer
from players.protocol import (
    KNOWN_NEEDS,
    NEED_IMAGE,
    NEED_PROGRAM,
    NEED_SCENE,
    Answer,
    AnswerError,
    Player,
    Query,
    canonical_answer,
)
from players.registry import available, load, register
from players.subprocess_player import SubprocessPlayer

__all__ = [
    "KNOWN_NEEDS", "NEED_IMAGE", "NEED_PROGRAM", "NEED_SCENE",
    "Answer", "AnswerError", "HttpPlayer", "OraclePlayer", "Player", "Query", "SubprocessPlayer",
    "available", "canonical_answer", "load", "register",
]
