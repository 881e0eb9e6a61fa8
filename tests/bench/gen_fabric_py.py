"""gen_fabric_py.py -- writes a large Python training script in the shapes
Fabric scripts have, for scripts/bench-check's Python throughput row.

Invariant: the script checks clean (no diagnostics), so the bench times the
analysis of correct code; each block is whole (a cut at a block boundary is
a valid script too) and its names are its own (class Block7, evaluate_7 ...),
as a long real script's are, so nothing is one repeated line.
Usage: gen_fabric_py.py OUT LINES  (LINES at least 60: the imports and main).
"""
import sys

HEAD = '''"""A generated Fabric training script: many modules, helpers and loops."""
import math
import os
from dataclasses import dataclass

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
'''.splitlines()


def block(i):
    dim = 32 + 8 * (i % 5)
    hidden = 4 * dim
    return f'''

class Block{i}(nn.Module):
    """Residual MLP block number {i}."""

    def __init__(self, dim: int = {dim}, hidden: int = {hidden}, dropout: float = 0.1) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        h = self.fc1(self.norm(x))
        h = self.drop(self.fc2(self.act(h)))
        return x + h


def make_loader_{i}(n: int, batch_size: int = 32):
    xs = torch.randn(n, {dim})
    ys = torch.randint(0, 10, (n,))
    return DataLoader(TensorDataset(xs, ys), batch_size=batch_size, shuffle=True)


def evaluate_{i}(model, loader, limit=None):
    total, correct = 0, 0
    for step, (x, y) in enumerate(loader):
        if limit is not None and step >= limit:
            break
        logits = model(x)
        correct += (logits.argmax(dim=-1) == y).sum().item()
        total += y.size(0)
    return correct / max(total, 1)


config_{i} = {{"lr": 1e-3 * ({i} % 7 + 1), "epochs": {2 + i % 3}, "name": f"run-{{{i}}}"}}
steps_{i} = [k * 2 for k in range(8) if k % 3 != 0]
if config_{i}["epochs"] > 2:
    schedule_{i} = [config_{i}["lr"] / (e + 1) for e in range(config_{i}["epochs"])]
else:
    schedule_{i} = [config_{i}["lr"]]
'''.splitlines()


MAIN = '''

def main(fabric: L.Fabric, epochs: int) -> None:
    fabric.seed_everything(42)
    model = nn.Sequential(Block0(), nn.Linear(32, 10))
    optimizer = torch.optim.AdamW(model.parameters(), lr=config_0["lr"])
    model, optimizer = fabric.setup(model, optimizer)
    loader = fabric.setup_dataloaders(make_loader_0(256))
    for epoch in range(epochs):
        model.train()
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            fabric.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        fabric.print(f"epoch {epoch}: accuracy {evaluate_0(model, loader, limit=4):.3f}")


if __name__ == "__main__":
    fabric = L.Fabric(accelerator="cpu", devices=1)
    fabric.launch(main, 2)
'''.splitlines()


def main():
    out, want = sys.argv[1], int(sys.argv[2])
    lines = list(HEAD)
    i = 0
    while True:
        b = block(i)
        if len(lines) + len(b) + len(MAIN) > want:
            break
        lines += b
        i += 1
    lines += MAIN
    while len(lines) < want:  # pad to the exact count with module-level names
        lines.append(f"pad_{len(lines)} = {len(lines)}")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


main()
