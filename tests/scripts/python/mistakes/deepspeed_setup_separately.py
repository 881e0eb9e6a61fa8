# mode: check
"""ZeRO stage 3 with DeepSpeedStrategy: one model and one optimizer set up
together, gradients clipped by DeepSpeed's config."""
# args: --gpus=4 --assume=deepspeed
import torch
import torch.nn as nn
import torch.nn.functional as F
from lightning.fabric import Fabric
from lightning.fabric.strategies import DeepSpeedStrategy
from torch.utils.data import DataLoader, TensorDataset


class MLP(nn.Module):
    def __init__(self, dim_in=32, hidden=256, classes=10):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(dim_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, classes)
        )

    def forward(self, x):
        return self.layers(x)


def train(fabric, model, optimizer, loader, epochs=2):
    model.train()
    for epoch in range(epochs):
        for x, y in loader:
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            fabric.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        fabric.print(f"epoch {epoch} loss {loss.item():.4f}")


def main():
    strategy = DeepSpeedStrategy(stage=3, offload_optimizer=False)
    fabric = Fabric(accelerator="cuda", devices=4, strategy=strategy, precision="bf16-mixed")
    fabric.launch()
    with fabric.init_module():
        model = MLP()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model = fabric.setup_module(model)
    optimizer = fabric.setup_optimizers(optimizer)  # error: The `DeepSpeedStrategy` requires the model and optimizer(s) to be set up jointly through `.setup(model, optimizer, ...)`.
    data = TensorDataset(torch.randn(1024, 32), torch.randint(0, 10, (1024,)))
    loader = fabric.setup_dataloaders(DataLoader(data, batch_size=32, shuffle=True))
    train(fabric, model, optimizer, loader)
    fabric.save("checkpoint", {"model": model, "optimizer": optimizer})


if __name__ == "__main__":
    main()
