# mode: check
"""K-fold cross-validation: a fresh model and optimizer per fold, in the shape
of Lightning's examples/fabric/kfold_cv."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision.transforms as T
from sklearn import model_selection
from torch.utils.data import DataLoader, SubsetRandomSampler
from torchmetrics.classification import Accuracy
from torchvision.datasets import MNIST

from lightning.fabric import Fabric, seed_everything


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x.flatten(1)))), dim=1)


def train_dataloader(model, data_loader, optimizer, fabric, epoch, hparams, fold):
    model.train()
    for batch_idx, (data, target) in enumerate(data_loader):
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        fabric.backward(loss)
        optimizer.step()
        if batch_idx % hparams.log_interval == 0:
            print(f"Fold {fold} epoch {epoch} [{batch_idx}/{len(data_loader)}] loss {loss.item():.6f}")


def validate_dataloader(model, data_loader, fabric, hparams, fold, acc_metric):
    model.eval()
    loss = 0
    with torch.no_grad():
        for data, target in data_loader:
            output = model(data)
            loss += F.nll_loss(output, target, reduction="sum").item()
            acc_metric.update(output, target)
    acc = acc_metric.compute() * 100
    loss = fabric.all_gather(loss).sum() / len(data_loader.dataset)
    print(f"Fold {fold} validation: loss {loss:.4f}, accuracy {acc:.0f}%")
    acc_metric.reset()
    return acc


def run(hparams):
    fabric = Fabric(accelerator="cpu", devices=2, strategy="ddp")
    fabric.launch()
    seed_everything(hparams.seed)
    transform = T.Compose([T.ToTensor(), T.Normalize((0.1307,), (0.3081,))])
    with fabric.rank_zero_first(local=False):
        dataset = MNIST("Datasets", train=True, download=True, transform=transform)
    kfold = model_selection.KFold(n_splits=5)
    acc_metric = Accuracy(task="multiclass", num_classes=10).to(fabric.device)

    for fold, (train_ids, val_ids) in enumerate(kfold.split(dataset)):
        print(f"Working on fold {fold}")
        train_loader = DataLoader(dataset, batch_size=hparams.batch_size, sampler=SubsetRandomSampler(train_ids))
        val_loader = DataLoader(dataset, batch_size=hparams.batch_size, sampler=SubsetRandomSampler(val_ids))
        train_loader, val_loader = fabric.setup_dataloaders(train_loader, val_loader)
        model = Net()
        optimizer = torch.optim.Adam(model.parameters(), lr=hparams.lr)
        model, optimizer = fabric.setup(model, optimizer)
        for epoch in range(1, hparams.epochs + 1):
            train_dataloader(model, train_loader, optimizer, fabric, epoch, hparams, fold)
            validate_dataloader(model, val_loader, fabric, hparams, fold, acc_metric)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Fabric MNIST K-Fold Cross Validation Example")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=14)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=10)
    run(parser.parse_args())
