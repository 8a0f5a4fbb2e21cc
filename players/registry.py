"""Players by name: `load("oracle")`, `load("subprocess:<command line>")`, `load("http://host:port/path")`.

Learned players register themselves by name with `register(name, factory)`; the
factory receives the keyword arguments given to `load`.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from clevr_game.cli_types import image_size
from clevr_game.errors import InputError
from players.guard import DEFAULT_FAILURE_WINDOW, DEFAULT_MAX_FAILURES, PlayerGuard
from players.http_player import SEND_IMAGE_MODES, HttpPlayer
from players.oracle import OraclePlayer
from players.protocol import (
    IMAGE_INLINE_FIELD,
    KNOWN_NEEDS,
    NEED_IMAGE,
    NEED_SCENE,
    ImageSpec,
    Player,
)
from players.subprocess_player import SubprocessPlayer

PlayerFactory = Callable[..., Player]

SUBPROCESS_PREFIX = "subprocess:"
PLAYER_FILE_PREFIX = "file:"
"""`file:PATH`: a state or pixel player file (any model kind), e.g. one written by `clevr-game players train`."""
HTTP_PREFIXES = ("http://", "https://")

_FACTORIES: dict[str, PlayerFactory] = {}


def register(name: str, factory: PlayerFactory, *, replace: bool = False) -> None:
    """Make `load(name, **kwargs)` return `factory(**kwargs)`."""
    if not name or ":" in name:
        raise ValueError(f"player name {name!r} must be non-empty and contain no ':'")
    if name in _FACTORIES and not replace:
        raise ValueError(f"player {name!r} is already registered (pass replace=True to override)")
    _FACTORIES[name] = factory


def available() -> list[str]:
    """Registered player names, sorted."""
    return sorted(_FACTORIES)


def load(name_or_spec: str, **kwargs: Any) -> Player:
    """A player from a registered name, `subprocess:<command line>` or an http(s) URL.

    Keyword arguments go to the player's constructor (e.g. `needs`, `timeout_s`).
    InputError (one line) for an unknown name or an empty command.
    """
    spec = name_or_spec.strip()
    if spec.startswith(SUBPROCESS_PREFIX):
        command = shlex.split(spec[len(SUBPROCESS_PREFIX):])
        if not command:
            raise InputError(f"player spec {name_or_spec!r}: no command after '{SUBPROCESS_PREFIX}'")
        return SubprocessPlayer(command, **kwargs)
    if spec.startswith(PLAYER_FILE_PREFIX):
        return _player_file(spec[len(PLAYER_FILE_PREFIX):], **kwargs)
    if spec.startswith(HTTP_PREFIXES):
        return HttpPlayer(spec, **kwargs)
    check_spec(spec)
    return _FACTORIES[spec](**kwargs)


def is_external(spec: str) -> bool:
    """True for players that run outside this process (subprocess, http): they can hang."""
    spec = spec.strip()
    return spec.startswith(SUBPROCESS_PREFIX) or spec.startswith(HTTP_PREFIXES) or spec == "majority"


def check_spec(name_or_spec: str) -> None:
    """InputError (one line) for a spec `load` would refuse, without starting the player."""
    spec = name_or_spec.strip()
    if spec.startswith(SUBPROCESS_PREFIX):
        try:
            command = shlex.split(spec[len(SUBPROCESS_PREFIX):])
        except ValueError as exc:
            raise InputError(f"player spec {name_or_spec!r}: {exc}") from None
        if not command:
            raise InputError(f"player spec {name_or_spec!r}: no command after '{SUBPROCESS_PREFIX}'")
        return
    if spec.startswith(PLAYER_FILE_PREFIX):
        path = spec[len(PLAYER_FILE_PREFIX):]
        if not path.strip() or not Path(path).is_file():
            raise InputError(f"player spec {name_or_spec!r}: no player file at {path!r}")
        return
    if spec.startswith(HTTP_PREFIXES):
        return
    if spec not in _FACTORIES:
        raise InputError(
            f"unknown player {name_or_spec!r} (expected one of {', '.join(available())}, "
            f"'{SUBPROCESS_PREFIX}<command line>', '{PLAYER_FILE_PREFIX}PATH' or an http:// URL)"
        )


SHIPPED_WEIGHTS = Path(__file__).resolve().parent / "weights"


def weights_file(name_or_spec: str) -> Path | None:
    """The file a spec's player reads its weights from: `file:PATH`, or a shipped player's file; None otherwise.

    Subprocess and http players and the oracle have none the project can see.
    """
    spec = name_or_spec.strip()
    if spec.startswith(PLAYER_FILE_PREFIX):
        return Path(spec[len(PLAYER_FILE_PREFIX):])
    shipped = SHIPPED_WEIGHTS / f"{spec}.pt"
    return shipped if spec in _FACTORIES and shipped.is_file() else None


def weights_digest(name_or_spec: str) -> str | None:
    """A short hash of the spec's weights file (None without one): which trained player a run faced."""
    path = weights_file(name_or_spec)
    if path is None or not path.is_file():
        return None
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def load_guarded(
    name_or_spec: str,
    *,
    timeout_s: float | None = None,
    startup_timeout_s: float | None = None,
    max_failures: int | None = DEFAULT_MAX_FAILURES,
    window: int = DEFAULT_FAILURE_WINDOW,
    player_input: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> PlayerGuard:
    """`load`, with failures counted and a limit on them (see players.guard).

    `timeout_s` bounds each answer of an external player (subprocess or http),
    `startup_timeout_s` its first answer (None: the player's own default);
    in-process players take no time-out. `player_input` holds the values of the
    input options given on the command line (`input_from_args`): what a model the
    user brings is sent; InputError for a player they do not apply to.
    """
    if is_external(name_or_spec):
        if timeout_s is not None:
            kwargs["timeout_s"] = timeout_s
        if startup_timeout_s is not None:
            kwargs["startup_timeout_s"] = startup_timeout_s
    if player_input:
        check_input(name_or_spec, player_input)
        kwargs.update(input_kwargs(name_or_spec, player_input))
    return PlayerGuard(load(name_or_spec, **kwargs), max_failures=max_failures, window=window)


# ---------------------------------------------------------------- what a model the user brings is sent

INPUT_OPTIONS = ("needs", "image_size", "render_preset", "send_image")
"""The options saying what an external player is sent (--needs, --image-size, --render-preset, --send-image):
it cannot announce its needs as a Python player does. Their values travel as strings, so a benchmark
trial and an attack's options.json hold them as given."""
DEFAULT_RENDER_PRESET = "fast"


def is_brought(spec: str) -> bool:
    """True for a model the user brings (`subprocess:COMMAND`, an http(s) URL): the input options are for it."""
    spec = spec.strip()
    return spec.startswith(SUBPROCESS_PREFIX) or spec.startswith(HTTP_PREFIXES)


def _needs_list(text: str) -> str:
    needs = [part.strip() for part in text.split(",")]
    unknown = [need for need in needs if need not in KNOWN_NEEDS]
    if unknown or not needs:
        raise argparse.ArgumentTypeError(
            f"must be a comma-separated list of {', '.join(sorted(KNOWN_NEEDS))}, got {text!r}")
    return ",".join(sorted(set(needs)))


def add_input_options(p: argparse.ArgumentParser) -> None:
    """--needs, --image-size, --render-preset, --send-image: what an external player is sent."""
    from clevr_game.render.presets import PRESETS

    default = PRESETS[DEFAULT_RENDER_PRESET]
    brought = f"external players ({SUBPROCESS_PREFIX}COMMAND, http(s)://) only"
    p.add_argument("--needs", type=_needs_list, default=None, metavar="LIST",
                   help=f"{brought}: what each query carries, comma-separated of "
                        f"{', '.join(sorted(KNOWN_NEEDS))} (default {NEED_SCENE}; docs/players.md)")
    p.add_argument("--image-size", type=image_size, default=None, metavar="WxH",
                   help=f"with --needs {NEED_IMAGE}: the image size the model was trained on "
                        f"(default: the render preset's, {default.width}x{default.height} for {default.name})")
    p.add_argument("--render-preset", choices=list(PRESETS), default=None,
                   help=f"with --needs {NEED_IMAGE}: the Blender render preset the model was trained on "
                        f"(default {DEFAULT_RENDER_PRESET})")
    p.add_argument("--send-image", choices=list(SEND_IMAGE_MODES), default=None,
                   help=f"with --needs {NEED_IMAGE}, http(s) players only: path (the PNG's path on this machine; "
                        f"the default) or inline (the PNG base64-encoded in the query's {IMAGE_INLINE_FIELD}, "
                        "for a model on another machine)")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def input_from_args(args: argparse.Namespace) -> dict[str, str]:
    """The input options given (none given: {}), checked against each other; InputError in one line."""
    given = {name: getattr(args, name) for name in INPUT_OPTIONS if getattr(args, name, None) is not None}
    needs = given.get("needs", NEED_SCENE).split(",")
    for name in ("image_size", "render_preset", "send_image"):
        if name in given and NEED_IMAGE not in needs:
            raise InputError(f"{_flag(name)}: only for a player that is sent images (--needs {NEED_IMAGE}); "
                             f"--needs is {','.join(needs)}")
    if "image_size" in given:
        width, height = (int(side) for side in given["image_size"].lower().split("x"))
        given["image_size"] = f"{width}x{height}"
        try:  # a portrait size fails now, not when the first image renders
            _image_spec(given)
        except InputError as exc:
            raise InputError(f"--image-size {given['image_size']}: {exc}") from None
    return given


def check_input(spec: str, given: Mapping[str, str]) -> None:
    """InputError (one line, naming the option) when input options are given for a player they do not apply to."""
    if not given:
        return
    if not is_brought(spec):
        raise InputError(f"{_flag(next(iter(given)))}: only for an external player ({SUBPROCESS_PREFIX}COMMAND or "
                         f"an http(s):// URL); {spec.strip()!r} declares what it needs itself")
    if given.get("send_image") == "inline" and not spec.strip().startswith(HTTP_PREFIXES):
        raise InputError(f"--send-image inline: only for an http(s):// player (a {SUBPROCESS_PREFIX} player "
                         f"runs here and reads the image's path), not {spec.strip()!r}")


def check_input_for_some(specs: Sequence[str], given: Mapping[str, str]) -> None:
    """For a list of players (a benchmark): the options apply to its external players, so at least one
    must be one (an http(s) one for --send-image inline); InputError in one line otherwise."""
    if not given:
        return
    brought = [spec for spec in specs if is_brought(spec)]
    if not brought:
        raise InputError(f"{_flag(next(iter(given)))}: only for external players ({SUBPROCESS_PREFIX}COMMAND or "
                         "an http(s):// URL), and none of the players is one")
    if given.get("send_image") == "inline" and not any(spec.strip().startswith(HTTP_PREFIXES) for spec in brought):
        raise InputError("--send-image inline: only for http(s):// players, and none of the players is one")


def input_for(spec: str, given: Mapping[str, str]) -> dict[str, str]:
    """The part of the input options `given` for a list of players that applies to the player `spec`."""
    if not is_brought(spec):
        return {}
    if spec.strip().startswith(HTTP_PREFIXES):
        return dict(given)
    return {name: value for name, value in given.items() if name != "send_image"}


def input_kwargs(spec: str, given: Mapping[str, str]) -> dict[str, Any]:
    """The player constructor's keyword arguments for checked input options: needs, image_spec, send_image."""
    needs = frozenset(given.get("needs", NEED_SCENE).split(","))
    kwargs: dict[str, Any] = {"needs": needs}
    if NEED_IMAGE in needs:
        kwargs["image_spec"] = _image_spec(given)
    if "send_image" in given and spec.strip().startswith(HTTP_PREFIXES):
        kwargs["send_image"] = given["send_image"]
    return kwargs


def _image_spec(given: Mapping[str, str]) -> ImageSpec:
    from clevr_game.render.presets import get_preset

    preset = get_preset(given.get("render_preset", DEFAULT_RENDER_PRESET))
    width, height = preset.width, preset.height
    if "image_size" in given:
        width, height = (int(side) for side in given["image_size"].lower().split("x"))
    return ImageSpec(preset.name, width, height).checked()


def _majority_example(**kwargs: Any) -> Player:
    # The example runs wherever the caller is: put this checkout on its import path.
    root = str(Path(__file__).resolve().parents[1])
    env = dict(kwargs.pop("env", None) or os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    kwargs.setdefault("name", "majority")
    return SubprocessPlayer([sys.executable, "-m", "players.examples.majority_player"], env=env, **kwargs)


register("oracle", OraclePlayer)
register("majority", _majority_example)


def _state_player(class_name: str) -> PlayerFactory:
    # Imported on first use: torch loads only when a learned player is asked for.
    def factory(**kwargs: Any) -> Player:
        from players.state import player

        return getattr(player, class_name)(**kwargs)

    return factory


def _player_file(path: str, **kwargs: Any) -> Player:
    if not path.strip():
        raise InputError(f"player spec '{PLAYER_FILE_PREFIX}': no path after '{PLAYER_FILE_PREFIX}'")
    kwargs.setdefault("name", f"{PLAYER_FILE_PREFIX}{path}")
    pixel_kind = pixel_file_kind(path)
    if pixel_kind is not None:
        from players.pixel.object_player import ObjectTransformerPlayer
        from players.pixel.player import FiLMPlayer, NeuroSymbolicPlayer, PixelRelationNetworkPlayer

        classes = {cls.kind: cls for cls in (PixelRelationNetworkPlayer, FiLMPlayer, NeuroSymbolicPlayer,
                                             ObjectTransformerPlayer)}
        return classes[pixel_kind](path, **kwargs)
    from players.state.blind import BlindPlayer
    from players.state.checkpoint import load_player_file
    from players.state.player import StatePlayer

    if load_player_file(path).kind == BlindPlayer.kind:  # sent no scene, as the shipped `blind` is
        return BlindPlayer(path, **kwargs)
    return StatePlayer(path, **kwargs)  # the base class takes a state file of either scene-reading kind


def pixel_file_kind(path: str) -> str | None:
    """The model kind of a pixel player file (or of the player in its training checkpoint); None for any
    other file, which the state player's reader then accepts or refuses in one line."""
    from players.pixel.checkpoint import FORMAT, PLAYER_KINDS
    from players.state.checkpoint import read_torch

    data = read_torch(path, "player file")
    if isinstance(data, dict) and "format" not in data and isinstance(data.get("player"), dict):
        data = data["player"]
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    kind = data.get("kind")
    if kind not in PLAYER_KINDS.values():
        raise InputError(f"{path}: unknown pixel model kind {kind!r}")
    return kind


register("state-transformer", _state_player("StateTransformerPlayer"))
register("state-rn", _state_player("StateRelationNetworkPlayer"))


def _blind(**kwargs: Any) -> Player:
    # Imported on first use, like the state players.
    from players.state.blind import BlindPlayer

    return BlindPlayer(**kwargs)


register("blind", _blind)


def _pixel_player(class_name: str) -> PlayerFactory:
    # Imported on first use, like the state players.
    def factory(**kwargs: Any) -> Player:
        from players.pixel import player

        return getattr(player, class_name)(**kwargs)

    return factory


register("pixel-rn", _pixel_player("PixelRelationNetworkPlayer"))
register("film", _pixel_player("FiLMPlayer"))
register("neuro-symbolic", _pixel_player("NeuroSymbolicPlayer"))


def _object_transformer(**kwargs: Any) -> Player:
    # Imported on first use, like the others.
    from players.pixel.object_player import ObjectTransformerPlayer

    return ObjectTransformerPlayer(**kwargs)


register("object-transformer", _object_transformer)


def _poc_player(class_name: str, **fixed: Any) -> PlayerFactory:
    # CLEVR-POC players (players/poc); torch and clingo load on first use.
    def factory(**kwargs: Any) -> Player:
        from players.poc import player

        return getattr(player, class_name)(**fixed, **kwargs)

    return factory


register("poc-state-neuro-symbolic", _poc_player("PocStateNeuroSymbolicPlayer"))
register("poc-neuro-symbolic", _poc_player("PocNeuroSymbolicPlayer"))
register("poc-neural", _poc_player("PocNeuralPlayer", knowledge="none"))
register("poc-neural-nl", _poc_player("PocNeuralPlayer", knowledge="nl"))
register("poc-neural-asp", _poc_player("PocNeuralPlayer", knowledge="asp"))

PLAYER_SPEC_HELP = (
    f"a registered name ({', '.join(available())}), {PLAYER_FILE_PREFIX}PATH (a player file), "
    f"{SUBPROCESS_PREFIX}COMMAND (a program answering JSON lines; quote the spec as one argument) "
    "or an http:// or https:// URL (docs/players.md)"
)
"""The forms of a player spec, for the help of every option that takes one (after the registrations above)."""
