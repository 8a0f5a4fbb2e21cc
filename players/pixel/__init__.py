"""Pixel-input learned players: image spec and dataset renders, networks, player files, training, the players.

`players.pixel.player` (torch) holds PixelRelationNetworkPlayer, FiLMPlayer and
NeuroSymbolicPlayer; load them by name with `players.load("pixel-rn")`,
`players.load("film")` or `players.load("neuro-symbolic")`.
"""
