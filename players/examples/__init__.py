"""Example players run as subprocesses (`python -m players.examples.<name>`)."""
