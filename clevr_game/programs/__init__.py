"""Functional programs and their executors (the full CLEVR catalogue)."""

from clevr_game.programs.executor import (
    INVALID,
    CompiledProgram,
    compile_program,
    execute,
    execute_scene,
    execute_trace,
)
from clevr_game.programs.facts import SceneFacts, compile_scene, compile_scene_dict
from clevr_game.programs.program import (
    ALL_FUNCTIONS,
    PRIMITIVE_FUNCTIONS,
    TEMPLATE_FUNCTIONS,
    Node,
    Program,
    parse_program,
    program_to_json,
)
from clevr_game.programs.reference import INVALID_ANSWER, reference_execute

__all__ = [
    "ALL_FUNCTIONS", "PRIMITIVE_FUNCTIONS", "TEMPLATE_FUNCTIONS", "INVALID_ANSWER",
    "Node", "Program", "parse_program", "program_to_json", "reference_execute",
    "SceneFacts", "compile_scene", "compile_scene_dict",
    "INVALID", "CompiledProgram", "compile_program", "execute", "execute_scene", "execute_trace",
]
