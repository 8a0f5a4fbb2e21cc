"""CLEVR-POC players: set answers about a hidden object, under an environment's constraints (players.poc.player)."""
