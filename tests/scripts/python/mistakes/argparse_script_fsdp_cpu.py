# mode: check
# args: -D accelerator=cpu -D devices=2 -D strategy=fsdp -D precision=32-true
"""The argparse-driven script with its options given by -D as the command
line would give them: FSDP on CPU is R10 at args.strategy."""
import argparse
import os

import torch
import torch.nn as nn
from lightning.fabric import Fabric
from torch.utils.data import DataLoader, TensorDataset


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--accelerator", default="auto")
    parser.add_argument("--devices", type=int, default=int(os.environ.get("NUM_DEVICES", "1")))
    parser.add_argument("--strategy", default="auto")
    parser.add_argument("--precision", default="32-true")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=1e-3)
    return parser.parse_args()


def build_model(hidden):
    return nn.Sequential(nn.Linear(20, hidden), nn.GELU(), nn.LayerNorm(hidden), nn.Linear(hidden, 2))


def main(args):
    fabric = Fabric(accelerator=args.accelerator, devices=args.devices, strategy=args.strategy,  # error: You selected the FSDP strategy but FSDP is only available on GPU. Set `Fabric(accelerator='gpu', ...)` to continue or select a different strategy.
                    precision=args.precision)
    fabric.launch()
    model = build_model(128)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    model, optimizer = fabric.setup(model, optimizer)
    data = TensorDataset(torch.randn(512, 20), torch.randint(0, 2, (512,)))
    loader = fabric.setup_dataloaders(DataLoader(data, batch_size=64, shuffle=True))
    for epoch in range(args.epochs):
        total = 0.0
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            fabric.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            total += loss.item()
        fabric.print(f"epoch {epoch}: {total / len(loader):.4f}")
    if fabric.is_global_zero:
        torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main(parse_args())
