# mode: check
# args: -D devices=2 -D precision=bf17
"""The finetuning script with CLI(setup)'s arguments given by -D as the command
line would give them: a precision Fabric does not know is R3."""
import dataclasses
import os
import sys
from pathlib import Path
from typing import Optional

import lightning as L
import torch
from jsonargparse import CLI
from lightning.fabric.loggers import CSVLogger
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from transformers import AutoModelForSequenceClassification


@dataclasses.dataclass
class TrainArgs:
    epochs: int = 3
    lr: float = 2e-5
    batch_size: int = 16
    max_norm: Optional[float] = 1.0


def make_data(n: int) -> TensorDataset:
    return TensorDataset(torch.randint(0, 30522, (n, 128)), torch.randint(0, 2, (n,)))


def evaluate(fabric, model, loader) -> float:
    model.eval()
    correct = 0
    with torch.no_grad():
        for input_ids, labels in loader:
            logits = model(input_ids).logits
            correct += (logits.argmax(-1) == labels).sum().item()
    model.train()
    return fabric.all_reduce(correct, reduce_op="sum") / len(loader.dataset)


def main(fabric: L.Fabric, checkpoint_dir: Path, out_dir: Path, train: TrainArgs) -> None:
    fabric.seed_everything(1337)
    with fabric.init_module():
        model = AutoModelForSequenceClassification.from_pretrained(str(checkpoint_dir), num_labels=2)
    for name, param in model.named_parameters():
        param.requires_grad = "classifier" in name
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=train.lr, weight_decay=0.01)
    model, optimizer = fabric.setup(model, optimizer)
    train_loader = DataLoader(make_data(512), batch_size=train.batch_size, shuffle=True)
    val_loader = DataLoader(make_data(128), batch_size=train.batch_size)
    train_loader, val_loader = fabric.setup_dataloaders(train_loader, val_loader)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(train.epochs):
        for step, (input_ids, labels) in enumerate(train_loader):
            loss = loss_fn(model(input_ids).logits, labels)
            fabric.backward(loss)
            if train.max_norm is not None:
                fabric.clip_gradients(model, optimizer, max_norm=train.max_norm)
            optimizer.step()
            optimizer.zero_grad()
            if step % 50 == 0:
                fabric.log_dict({"loss": loss.item(), "epoch": epoch}, step=step)
        fabric.print(f"epoch {epoch}: accuracy {evaluate(fabric, model, val_loader):.3f}")
    fabric.save(out_dir / "finetuned.ckpt", {"model": model})


def setup(
    checkpoint_dir: Path = Path("checkpoints/bert-base-uncased"),
    out_dir: Path = Path("out/finetune"),
    devices: int = 1,
    precision: str = "bf16-true",
    train: TrainArgs = TrainArgs(),
) -> None:
    logger = CSVLogger(out_dir, name="finetune")
    fabric = L.Fabric(devices=devices, strategy="auto", precision=precision, loggers=logger)  # error: Precision 'bf17' is invalid.
    fabric.launch(main, checkpoint_dir, out_dir, train)


if __name__ == "__main__":
    torch.set_float32_matmul_precision("high")
    CLI(setup)
