# mode: check
"""Class-defined models whose layer sizes are known agree, and sizes the
checker cannot know are never an error: a width from the command line, a
branch in forward, a reshape, a functional activation, a residual sum, a
ModuleList loop, an unmodelled layer, a Sequential built from a list."""
import argparse

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return x + self.fc(self.norm(x))


class Net(nn.Module):
    def __init__(self, width: int, depth: int = 2) -> None:
        super().__init__()
        self.stem = nn.Linear(784, 256)
        self.proj = nn.Linear(width, 256)        # width: unknown
        self.blocks = nn.ModuleList([Block(256) for _ in range(depth)])
        self.conv = nn.Conv2d(1, 8, 3)           # not modelled
        self.head = nn.Sequential(*[nn.Linear(256, 256), nn.ReLU()])
        self.out = nn.Linear(256, 10)

    def forward(self, x, use_proj: bool = False):
        if use_proj:
            x = self.proj(x)
        h = self.stem(x.view(x.size(0), -1))
        h = F.relu(h)
        for block in self.blocks:
            h = block(h)
        h = self.head(h)
        h = self.out(h)
        return h


parser = argparse.ArgumentParser()
parser.add_argument("--width", type=int, default=512)
args = parser.parse_args()
fabric = L.Fabric(accelerator="cpu", devices=1)
fabric.launch()
model = fabric.setup_module(Net(args.width))
twin = nn.Sequential(Block(256), nn.Linear(256, 10))
odd = nn.Sequential(nn.Linear(args.width, args.width), nn.Linear(32, 4))
logits = model(torch.randn(4, 784))
