"""clevr-game: the CLEVR world (scenes, programs, questions, CLEVR-POC) for black-box VQA robustness games.

Importing this package stays light: no torch, no gymnasium, no bpy.
"""

__version__ = "0.1.0"
