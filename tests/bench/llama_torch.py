"""llama_torch.py -- PyTorch peer of examples/llama.fab for scripts/bench-train:
the same LLaMA-style model (tests/parity/llama_parity.py's classes: vocab
256, dim 128, 4 heads, 4 layers, SwiGLU hidden 341, context 64, batch 32,
AdamW 3e-3 / wd 0.1, clip 1.0) on one CPU device, on random windows of the
GPL text. Prints "seconds S" for STEPS steps (after 5 warm-up steps, import
and set-up excluded). Usage: python3 llama_torch.py THREADS STEPS"""
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
from llama_parity import Llama  # noqa: E402

threads, steps = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(threads)
V, T, D, H, L, B = 256, 64, 128, 4, 4, 32
data = torch.tensor(list(open("/usr/share/common-licenses/GPL-3", "rb").read()), dtype=torch.long)
torch.manual_seed(1337)
model = Llama(V, D, H, L, 4 * D * 2 // 3)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)


def step():
    ix = torch.randint(len(data) - T - 1, (B,))
    x = torch.stack([data[i:i + T] for i in ix])
    y = torch.stack([data[i + 1:i + T + 1] for i in ix])
    loss = F.cross_entropy(model(x).view(-1, V), y.view(-1))
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss


for _ in range(5):
    step()
t0 = time.perf_counter()
for _ in range(steps):
    loss = step()
print(f"seconds {time.perf_counter() - t0:.3f}  (final loss {loss.item():.3f})")
