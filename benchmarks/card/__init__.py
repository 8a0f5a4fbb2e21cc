"""The robustness card: `clevr-game evaluate` on the frozen protocol, and the leaderboard of cards."""
