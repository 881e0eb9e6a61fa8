"""lm_parity.py -- examples/ports/language_model.fab against the same script
in torch 1.13 (the losses of its first 20 steps).

Usage: lm_parity.py FABRICSCRIPT EXAMPLES_DIR TMPDIR.

The port runs at a small size with dropout 0 (torch's dropout masks come
from its own generator), saves its initial weights with fabric.save and
prints the loss of every step. The twin here is the same script in PyTorch:
the same data set class over the GPL-3 bytes, random_split and a shuffled
DataLoader with the same seeded torch.Generator (FabricScript draws
torch's permutations from a torch.Generator, so the batches are the same
without exchanging them), the same PositionalEncoding and Transformer
classes, but torch's own nn.TransformerEncoder / nn.TransformerEncoderLayer
(batch_first, post-norm, ReLU) where the port writes the layer out as a
class with the same attribute names: the weights load strictly, so the
port's layer is checked against torch's. SGD(lr=0.1) with gradient clipping
by value (clip_grad_value_, as fabric.clip_gradients(clip_val=) does).
Every loss must agree within TOL relative: the printed six decimals and
float32 sums taken in another order (measured worst: about 3e-7)."""
import math
import subprocess
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, random_split

STEPS, NINP, NHEAD, NHID, NLAYERS, BLOCK, BATCH = 20, 32, 2, 64, 2, 16, 8
TOL = 1e-5
TEXT = "/usr/share/common-licenses/GPL-3"


class ByteText(Dataset):
    def __init__(self, path, block_size):
        super().__init__()
        self.data = torch.tensor(list(open(path, "rb").read()), dtype=torch.long)
        self.block_size = block_size
        self.vocab_size = 256

    def __len__(self):
        return (len(self.data) - self.block_size) // self.block_size - 1

    def __getitem__(self, index):
        start = index * self.block_size
        return self.data[start:start + self.block_size], self.data[start + 1:start + 1 + self.block_size]


class PositionalEncoding(nn.Module):
    def __init__(self, dim, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, dim, 2) * (-math.log(10000.0) / dim))
        pe = torch.zeros(1, max_len, dim)
        pe[0, :, 0::2] = torch.sin(position * div_term)
        pe[0, :, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[:, : x.size(1)]
        return self.dropout(x)


class Transformer(nn.Module):
    def __init__(self, vocab_size, ninp, nhead, nhid, nlayers, dropout):
        super().__init__()
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        self.embedding = nn.Embedding(vocab_size, ninp)
        layer = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout, batch_first=True)
        self.transformer = nn.TransformerEncoder(layer, nlayers)
        self.decoder = nn.Linear(ninp, vocab_size)
        self.ninp = ninp
        self.vocab_size = vocab_size

    def forward(self, inputs):
        _, t = inputs.shape
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        src = self.pos_encoder(self.embedding(inputs) * math.sqrt(self.ninp))
        output = self.decoder(self.transformer(src, mask))
        return F.log_softmax(output, dim=-1).view(-1, self.vocab_size)


def main(fs, examples, tmp):
    init = f"{tmp}/lm_init.ckpt"
    cmd = [fs, f"{examples}/ports/language_model.fab", "-D", "epochs=1", "-D", f"max_batches={STEPS}",
           "-D", "val_batches=1", "-D", f"ninp={NINP}", "-D", f"nhead={NHEAD}", "-D", f"nhid={NHID}",
           "-D", f"nlayers={NLAYERS}", "-D", f"block_size={BLOCK}", "-D", f"batch_size={BATCH}",
           "-D", "dropout=0.0", "-D", "log_every=1", "-D", f"init_weights={init}", "--no-progress"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
    if r.returncode != 0:
        raise SystemExit(f"examples/ports/language_model.fab failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    got = [float(line.split()[-1]) for line in r.stdout.splitlines() if line.startswith("epoch: ")]

    torch.manual_seed(0)  # the weights come from the port's checkpoint; nothing else is random
    dataset = ByteText(TEXT, BLOCK)
    n = len(dataset)
    held_out = n // 10
    train_dataset, _, _ = random_split(dataset, [n - 2 * held_out, held_out, held_out],
                                       generator=torch.Generator().manual_seed(42))
    loader = DataLoader(train_dataset, batch_size=BATCH, shuffle=True, generator=torch.Generator().manual_seed(42))
    model = Transformer(256, NINP, NHEAD, NHID, NLAYERS, 0.0)
    model.load_state_dict(torch.load(init)["model"])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    want = []
    for batch_idx, (x, y) in enumerate(loader):
        loss = F.nll_loss(model(x), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_value_(model.parameters(), 0.25)
        optimizer.step()
        optimizer.zero_grad()
        want.append(loss.item())
        if batch_idx + 1 == STEPS:
            break

    print("fabricscript:", got)
    print("torch:       ", want)
    if len(got) != STEPS:
        raise SystemExit(f"FAIL: {len(got)} losses from the port, want {STEPS}")
    worst = max(abs(g - w) / abs(w) for g, w in zip(got, want))
    if worst > TOL:
        raise SystemExit(f"FAIL: losses differ by {worst:.2e} relative (tolerance {TOL:.0e})")
    print(f"ok   examples/ports/language_model.fab trains as its torch twin: {STEPS} losses within "
          f"{TOL:.0e} relative (worst {worst:.1e})")


if __name__ == "__main__":
    main(*sys.argv[1:4])
