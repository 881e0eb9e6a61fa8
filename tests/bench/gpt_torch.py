"""PyTorch eager peer of examples/gpt.fab for scripts/gpu-check: the same
byte-level GPT (vocab 256, context 64, dim 128, 4 heads, 4 layers, batch 32,
AdamW 3e-3 / wd 0.1, clip 1.0) on one device.  Prints "tokens/s N".
Usage: python3 gpt_torch.py [device] [steps] [threads]"""
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

dev = sys.argv[1] if len(sys.argv) > 1 else "cuda"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 100
if len(sys.argv) > 3:
    torch.set_num_threads(int(sys.argv[3]))  # intra-op threads (the default is every core)
V, T, D, H, L, B = 256, 64, 128, 4, 4, 32


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn, self.c_proj = nn.Linear(D, 3 * D), nn.Linear(D, D)

    def forward(self, x):
        q, k, v = self.c_attn(x).split(D, dim=2)
        q, k, v = (t.view(x.size(0), T, H, D // H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (D // H) ** 0.5  # eager, no fused kernel: as written
        att = att.masked_fill(torch.ones(T, T, device=x.device).tril() == 0, float("-inf")).softmax(-1)
        return self.c_proj((att @ v).transpose(1, 2).reshape(x.shape))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.attn, self.ln2 = nn.LayerNorm(D), Attention(), nn.LayerNorm(D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Parameter(torch.zeros(T, D))
        self.h = nn.Sequential(*[Block() for _ in range(L)])
        self.ln_f, self.lm_head = nn.LayerNorm(D), nn.Linear(D, V, bias=False)

    def forward(self, idx):
        return self.lm_head(self.ln_f(self.h(self.wte(idx) + self.wpe)))


try:
    text = open("/usr/share/common-licenses/GPL-3", "rb").read()
except OSError:
    text = bytes(range(256)) * 200
data = torch.tensor(list(text), dtype=torch.long)
torch.manual_seed(1337)
model = GPT().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)


def step():
    ix = torch.randint(len(data) - T - 1, (B,))
    x = torch.stack([data[i:i + T] for i in ix]).to(dev)
    y = torch.stack([data[i + 1:i + T + 1] for i in ix]).to(dev)
    loss = F.cross_entropy(model(x).view(-1, V), y.view(-1))
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss


for _ in range(10):
    step()
if dev == "cuda":
    torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(steps):
    loss = step()
loss.item()
print(f"tokens/s {steps * B * T / (time.perf_counter() - t0):.0f}  (final loss {loss.item():.3f})")
