"""The building blocks the pixel networks share: image normalisation, coordinate maps, a conv block.

Apart from `models` and `perception`, which both build on them and one of which uses the other.
"""

from __future__ import annotations

import torch
from torch import nn

# Rough per-channel statistics of the renders: inputs near zero mean and unit scale.
_PIXEL_MEAN = 0.45
_PIXEL_SCALE = 0.25


def normalise_images(images: torch.Tensor) -> torch.Tensor:
    """(B, H, W, 3) uint8 -> (B, 3, H, W) float, about zero mean and unit scale."""
    return (images.permute(0, 3, 1, 2).float() / 255.0 - _PIXEL_MEAN) / _PIXEL_SCALE


def coordinate_maps(batch: int, height: int, width: int, device: torch.device) -> torch.Tensor:
    """(B, 2, H, W): x and y of every cell in -1..1 (the CoordConv trick: position as input)."""
    ys = torch.linspace(-1.0, 1.0, height, device=device)
    xs = torch.linspace(-1.0, 1.0, width, device=device)
    grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([grid_x, grid_y]).unsqueeze(0).expand(batch, -1, -1, -1)


def conv_block(in_channels: int, out_channels: int, stride: int = 1, dilation: int = 1) -> nn.Sequential:
    """3x3 convolution, batch norm, ReLU (padding keeps the size at stride 1)."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=dilation, dilation=dilation, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
    )
