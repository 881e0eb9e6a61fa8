# mode: check
"""Callbacks and loggers: Fabric(callbacks=[...]) and fabric.call(...) at the
hooks, with an early-stopping callback class of the script's own."""
import lightning as L
import torch
from lightning.fabric.loggers import TensorBoardLogger
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class PrintingCallback:
    def on_train_start(self, model):
        print(f"training {type(model).__name__}")

    def on_train_epoch_end(self, epoch, loss):
        print(f"epoch {epoch} done, loss {loss:.4f}")


class EarlyStopping:
    def __init__(self, patience: int = 3):
        self.patience = patience
        self.best = float("inf")
        self.bad_epochs = 0
        self.should_stop = False

    def on_validation_end(self, val_loss):
        if val_loss < self.best:
            self.best = val_loss
            self.bad_epochs = 0
        else:
            self.bad_epochs += 1
            self.should_stop = self.bad_epochs >= self.patience


def main():
    stopper = EarlyStopping(patience=2)
    fabric = L.Fabric(accelerator="cpu", devices=1, callbacks=[PrintingCallback(), stopper],
                      loggers=TensorBoardLogger("logs"))
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentm=0.9)  # error: SGD() got an unexpected keyword argument 'momentm'
    model, optimizer = fabric.setup(model, optimizer)
    data = TensorDataset(torch.randn(256, 16), torch.randn(256, 1))
    train_loader, val_loader = fabric.setup_dataloaders(DataLoader(data, batch_size=32), DataLoader(data, batch_size=64))
    fabric.call("on_train_start", model=model)
    for epoch in range(50):
        for x, y in train_loader:
            loss = nn.functional.mse_loss(model(x), y)
            fabric.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        fabric.call("on_train_epoch_end", epoch=epoch, loss=loss.item())
        with torch.no_grad():
            val_loss = sum(nn.functional.mse_loss(model(x), y).item() for x, y in val_loader)
        fabric.log("val_loss", val_loss, step=epoch)
        fabric.call("on_validation_end", val_loss=val_loss)
        if stopper.should_stop:
            break


if __name__ == "__main__":
    main()
