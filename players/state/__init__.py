"""State-input learned players: features, networks, player files, the players, evaluation.

`players.state.player` (torch) holds StateTransformerPlayer and
StateRelationNetworkPlayer; load them by name with `players.load("state-transformer")`
or `players.load("state-rn")`.
"""
