# mode: check
"""A trainer class of the script's own holding the Fabric object, in the
shape of Lightning's examples/fabric/build_your_own_trainer: methods are
analysed where called, with self's fabric and model."""
from typing import Any, Optional

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class MyTrainer:
    def __init__(self, accelerator="auto", strategy="auto", devices="auto", precision="32-true",
                 max_epochs: Optional[int] = 10, grad_accum_steps: int = 1):
        self.fabric = L.Fabric(accelerator=accelerator, strategy=strategy, devices=devices, precision=precision)
        self.max_epochs = max_epochs
        self.grad_accum_steps = grad_accum_steps
        self.global_step = 0

    def fit(self, model, train_loader, val_loader=None, ckpt_path: Optional[str] = None):
        self.fabric.launch()
        train_loader = self.fabric.setup_dataloaders(train_loader)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        model, optimizer = self.fabric.setup(model, optimizer)
        state = {"model": model, "optim": optimizer}
        if ckpt_path is not None:
            self.fabric.load(ckpt_path, state)
        for epoch in range(self.max_epochs):
            self.train_loop(model, optimizer, train_loader)
            self.fabric.save(f"epoch-{epoch:04d}.ckpt", state)

    def train_loop(self, model, optimizer, train_loader):
        for batch_idx, (x, y) in enumerate(train_loader):
            should_step = (batch_idx + 1) % self.grad_accum_steps == 0
            with self.fabric.no_backward_sync(model, enabled=not should_step):
                loss = nn.functional.mse_loss(model(x), y)
                self.fabric.backward(loss)
            if should_step:
                optimizer.step()
                optimizer.zero_grad()
                self.global_step += 1


if __name__ == "__main__":
    trainer = MyTrainer(accelerator="cpu", devices=1, max_epochs=2)
    net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    data = TensorDataset(torch.randn(128, 8), torch.randn(128, 1))
    trainer.fit(net, DataLoader(data, batch_size=16))
