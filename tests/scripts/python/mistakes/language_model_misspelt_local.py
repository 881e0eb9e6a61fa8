# mode: check
"""A word-level transformer language model on WikiText-2, in the shape of
Lightning's examples/fabric/language_model."""
import math

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from lightning.pytorch.demos import Transformer, WikiText2
from torch.utils.data import DataLoader, random_split


class PositionalEncoding(nn.Module):
    def __init__(self, dim: int, dropout: float = 0.1, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, dim, 2) * (-math.log(10000.0) / dim))
        pe = torch.zeros(max_len, 1, dim)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[: x.size(0)]
        return self.dropout(x)


class LanguageModel(nn.Module):
    def __init__(self, vocab_size: int, dim: int = 200, nhead: int = 2, nlayers: int = 2):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, dim)
        self.pos_encoder = PositionalEncoding(dim)
        layer = nn.TransformerEncoderLayer(dim, nhead, dim_feedforward=200, dropout=0.2)
        self.encoder = nn.TransformerEncoder(layer, nlayers)
        self.decoder = nn.Linear(dim, vocab_size)

    def forward(self, src, mask=None):
        src = self.embedding(src) * math.sqrt(self.embedding.embedding_dim)
        src = self.pos_encoder(src)
        return self.decoder(self.encoder(src, mask))


def validate(fabric, model, val_dataloader):
    fabric.print("Validating ...")
    model.eval()
    losses = torch.zeros(len(val_dataloader))
    for k, batch in enumerate(val_dataloader):
        input, target = batch
        output = model(input, target)
        loss = F.nll_loss(output, target.view(-1))
        losses[k] = loss.item()
    out = losses.mean()
    model.train()
    return out


def main():
    L.seed_everything(42)
    fabric = L.Fabric(accelerator="cpu", devices=1)

    dataset = WikiText2()
    n = len(dataset)
    train_dataset, val_dataset, test_dataset = random_split(dataset, [n - 4000, 2000, 2000])
    train_dataloader = DataLoader(train_dataset, batch_size=20, shuffle=True)
    val_dataloader = DataLoader(val_dataset, batch_size=20, shuffle=False)
    train_dataloader, val_dataloader = fabric.setup_dataloaders(train_dataloader, val_dataloader)

    with fabric.init_module():
        model = LanguageModel(vocab_size=dataset.vocab_size)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = fabric.setup(model, optimizer)

    for epoch in range(20):
        for batch_idx, batch in enumerate(train_dataloader):
            input, target = batch
            output = model(input)
            loss = F.nll_loss(output, target.view(-1))
            fabric.backward(loss)
            fabric.clip_gradients(model, optimizer, clip_val=0.25)
            optimizer.step()
            optimizer.zero_grad()
            if batch_idx % 200 == 0:
                fabric.print(f"epoch: {epoch} - iteration: {batch_idx} - loss {loss.item():.4f}")
        val_loss = validate(fabric, model, val_dataloder)  # error: name 'val_dataloder' is not defined
        fabric.print(f"val loss: {val_loss.item():.4f}")


if __name__ == "__main__":
    main()
