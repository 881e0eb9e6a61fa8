"""examples/llama.fab against the same LLaMA-style model in torch 1.13.

Usage: llama_parity.py FABRICSCRIPT EXAMPLES_DIR TMPDIR.  (Importing it
gives the torch model only: tests/bench/llama_torch.py does.)

Runs the example itself at a small size on one CPU device, unshuffled (batch
k holds the windows that start at bytes k*B .. k*B+B-1 of the GPL text, as
TextDataset makes them), with its initial weights saved by fabric.save and
the loss of every step printed. Torch builds the same classes (torch 1.13
has no RMSNorm nor scaled_dot_product_attention: both are written out as
their formulas), loads those weights strictly (torch's state-dict names),
trains the same steps with AdamW and gradient clipping, and every loss must
agree within TOL relative (measured: 1.7e-7, the printed digits; the two
runs sum in different orders, and 20 AdamW steps could amplify float32
rounding)."""
import math
import subprocess
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

STEPS, DIM, HEADS, LAYERS, CONTEXT, BATCH = 20, 32, 4, 2, 16, 8
TOL = 1e-5
TEXT = "/usr/share/common-licenses/GPL-3"


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * (x.pow(2).mean(-1, keepdim=True) + self.eps).rsqrt() * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, -1)
    return torch.cat([-x2, x1], -1)


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        q = self.wq(x).view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = self.wk(x).view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = self.wv(x).view(B, T, self.heads, C // self.heads).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        att = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        return self.wo((att @ v).transpose(1, 2).reshape(B, T, C))


class SwiGLU(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.w2(self.act(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.attn_norm = RMSNorm(dim)
        self.attn = Attention(dim, heads)
        self.mlp_norm = RMSNorm(dim)
        self.mlp = SwiGLU(dim, hidden)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Llama(nn.Module):
    def __init__(self, vocab, dim, heads, layers, hidden):
        super().__init__()
        self.head_dim = dim // heads
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([Block(dim, heads, hidden) for _ in range(layers)])
        self.norm = RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        T = idx.shape[1]
        inv_freq = (torch.arange(0, self.head_dim, 2).float() * (-math.log(10000.0) / self.head_dim)).exp()
        angles = torch.arange(T).float().unsqueeze(1) * inv_freq.unsqueeze(0)
        angles = torch.cat([angles, angles], -1)
        cos, sin = angles.cos(), angles.sin()
        h = self.tok_embeddings(idx)
        for layer in self.layers:
            h = layer(h, cos, sin)
        return self.output(self.norm(h))


def main(fs, examples, tmp):
    init = f"{tmp}/llama_init.ckpt"
    cmd = [fs, f"{examples}/llama.fab", "-D", "accelerator=cpu", "-D", "strategy=auto", "-D", "devices=1",
           "-D", f"steps={STEPS}", "-D", f"dim={DIM}", "-D", f"heads={HEADS}", "-D", f"layers={LAYERS}",
           "-D", f"context={CONTEXT}", "-D", f"batch_size={BATCH}", "-D", "sample=4", "-D", "shuffle=False",
           "-D", "log_every=1", "-D", f"init_weights={init}"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
    if r.returncode != 0:
        raise SystemExit(f"examples/llama.fab failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    got = [float(line.split()[-1]) for line in r.stdout.splitlines() if line.startswith("step ")]

    model = Llama(256, DIM, HEADS, LAYERS, 4 * DIM * 2 // 3)
    model.load_state_dict(torch.load(init)["model"])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    text = torch.tensor(list(open(TEXT, "rb").read()), dtype=torch.long)
    want = []
    for step in range(STEPS):
        starts = range(step * BATCH, step * BATCH + BATCH)
        x = torch.stack([text[i:i + CONTEXT] for i in starts])
        y = torch.stack([text[i + 1:i + 1 + CONTEXT] for i in starts])
        loss = F.cross_entropy(model(x).view(-1, 256), y.view(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        want.append(loss.item())

    print("fabricscript:", got)
    print("torch:       ", want)
    worst = max((abs(g - w) / abs(w) for g, w in zip(got, want)), default=0.0)
    if len(got) != STEPS:
        raise SystemExit(f"FAIL: {len(got)} losses from the example, want {STEPS}")
    if worst > TOL:
        raise SystemExit(f"FAIL: losses differ by {worst:.2e} relative (tolerance {TOL:.0e})")
    print(f"ok   examples/llama.fab trains as torch's twin: {STEPS} losses within {TOL:.0e} relative (worst {worst:.1e})")


if __name__ == "__main__":
    main(*sys.argv[1:4])
