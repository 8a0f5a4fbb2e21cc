"""File names in an attack's run folder and a benchmark's results folder.

Written by `agents.attack` and `benchmarks.runner`, read by `clevr_game.export`
and `benchmarks.report`. The names live here, at the bottom of the package
graph, because the world's exporter reads them and never imports an agent.
"""

RESULT_FILE = "result.json"
"""An attack run's scores, options and best manipulation per item; its presence means the run finished."""

MANIPULATIONS_FILE = "manipulations.jsonl"
"""Every valid move an attack's evaluation played, one manipulation record a line."""

CHECKPOINT_FILE = "checkpoint.pt"
"""The adversary's training state, to resume an interrupted attack."""

RUN_OPTIONS_FILE = "options.json"
"""The options of the attack that wrote the checkpoint: a resume with other options is refused."""

MINIGAMES_FILE = "minigames.json"
"""The attack's split of the item pool into mini-games."""

TRIALS_FILE = "trials.jsonl"
"""A benchmark's trial records, one a line, sorted by trial id."""

SEARCH_MANIPULATIONS_FILE = "search_manipulations.jsonl"
"""In a benchmark trial's run folder: the greedy search baseline's flips, one manipulation record a line."""
