"""CLEVR-POC with clingo: environments, constrained scenes, hidden-object questions, the constraint checker."""
