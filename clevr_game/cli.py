"""The `clevr-game` command line: the one thin module that sees every package.

Each package's `commands` module adds its command group; those modules are
imported when the parser is built and each handler imports what it runs, so
`import clevr_game.cli` stays light. A ClevrGameError ends the run with one line
on stderr and exit status 2 (bad input or usage) or 1 (a run that could not give
a trustworthy result, such as a player that kept failing).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from clevr_game.errors import ClevrGameError

DESCRIPTION = ("Black-box robustness testing of visual reasoning models: CLEVR scenes and questions, "
               "players, an adversary that moves objects, benchmarks, exports, CLEVR-POC.")

Handler = Callable[[argparse.Namespace], int | None]

COMMAND_GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("clevr_game.commands", "add_generate_commands", ("generate",)),
    ("clevr_game.commands", "add_answer_commands", ("answer",)),
    ("envs.commands", "add_game_commands", ("play",)),
    ("agents.commands", "add_attack_commands", ("attack",)),
    ("benchmarks.commands", "add_benchmark_commands", ("benchmark", "report")),
    ("benchmarks.card.commands", "add_card_commands", ("evaluate", "leaderboard")),
    ("envs.poc_commands", "add_poc_commands", ("poc",)),
    ("clevr_game.export.commands", "add_export_commands", ("export",)),
    ("experiments.commands", "add_adversarial_training_commands", ("adversarial-training",)),
    ("players.commands", "add_player_commands", ("players",)),
    ("clevr_game.render.commands", "add_render_commands", ("render",)),
    ("clevr_game.commands", "add_exhaustive_commands", ("exhaustive",)),
    ("experiments.commands", "add_study_commands", ("study",)),
)
"""(module, function, the commands it adds) for each command group, in the order `clevr-game --help` lists them."""


class OneLineParser(argparse.ArgumentParser):
    """A bad command line ends with one line, as every other error does; `--help` still shows the usage.

    argparse prints the whole usage first, which for `attack` is fifteen lines
    above the one that says what is wrong. Sub-commands' parsers are this class too.
    A missing command keeps the usage: it is the list of commands to choose from.
    """

    def error(self, message: str) -> NoReturn:
        if self._subparsers is not None and message.startswith("the following arguments are required"):
            super().error(message)
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given the arguments, only the chosen command's group is imported.

    A command's group module imports its options' dataclasses (and through them
    numpy or gymnasium); building every group costs a quick command such as
    `answer` a third of a second, so the others are left out unless the
    arguments name no known command (then `--help` and errors list them all).
    """
    parser = OneLineParser(prog="clevr-game", description=DESCRIPTION)
    subparsers = parser.add_subparsers(dest="command", required=True)
    chosen = _chosen_command(argv)
    groups = [g for g in COMMAND_GROUPS if chosen in g[2]] or COMMAND_GROUPS
    for module, add_commands, _ in groups:
        getattr(importlib.import_module(module), add_commands)(subparsers)
    return parser


def _chosen_command(argv: Sequence[str] | None) -> str | None:
    """The first argument when it is an option-free command name (top-level options are only -h)."""
    if not argv:
        return None
    return argv[0] if not argv[0].startswith("-") else None


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(arguments)
    args = parser.parse_args(arguments)
    args.argv = arguments  # what a results folder records as the command that made it
    handler: Handler = args.handler
    try:
        return int(handler(args) or 0)
    except ClevrGameError as exc:
        print(f"clevr-game: error: {exc}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print("clevr-game: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
