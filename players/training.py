"""Moved to `players.state.training`; these names stay importable from here for the modules that
still import them from the old path (players/commands.py, players/pixel/neuro_symbolic.py).
"""

from players.state.training import TrainingOptions, train, with_new_words

__all__ = ["TrainingOptions", "train", "with_new_words"]
