"""16-mixed's GradScaler against torch 1.13's arithmetic.

Usage: amp16_parity.py FABRICSCRIPT TMPDIR.

A FabricScript run on CUDA (--emulate-cuda) with precision="16-mixed" trains
an MLP with Adam, its loss multiplied by 40 so that the first steps'
scaled gradients overflow float16 (the scaler skips them and backs off from
65536), clipping every other step.  torch 1.13 has no float16 autocast on
the CPU and its GradScaler disables itself without CUDA, so the twin does
the same arithmetic by hand: every autocast linear takes float16-rounded
operands (x.half().float(): the gradient through it rounds to float16 as
well) and rounds its output, and GradScaler's scale / unscale_ (inf check,
inv_scale = scale.double().reciprocal().float()) / skipped step / update
(backoff 0.5, growth 2.0 after 2000 clean steps) are replayed.  The same
steps must be skipped (a skipped step repeats its loss exactly) and the
losses agree within 2e-3 relative (measured 3.6e-4: float16 roundings
that flip with the order of additions)."""
import subprocess
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

fs, tmp = sys.argv[1], sys.argv[2]
STEPS = 30
TOL = 2e-3

SCRIPT = f"""
fabric = Fabric(accelerator="cuda", devices=1, precision="16-mixed")
fabric.seed_everything(5)
model = Sequential(Linear(16, 32), ReLU(), Linear(32, 4))
fabric.save("{tmp}/init.ckpt", {{"model": model}})
model = fabric.setup_module(model)
opt = fabric.setup_optimizers(Adam(model.parameters(), lr=0.01))
x = fabric.to_device((arange(128).float().view(8, 16) * 0.37).sin() * 3.0)
y = fabric.to_device(tensor([0, 1, 2, 3, 0, 1, 2, 3]))
for step in range({STEPS}):
    loss = cross_entropy(model(x), y) * 40.0
    opt.zero_grad()
    fabric.backward(loss)
    if step % 2 == 0:
        fabric.clip_gradients(model, opt, max_norm=5.0)
    opt.step()
    print(repr(loss.item()))
"""

path = f"{tmp}/amp16.fab"
with open(path, "w") as f:
    f.write(SCRIPT)
r = subprocess.run([fs, "--emulate-cuda", path], capture_output=True, text=True)
if r.returncode != 0:
    raise SystemExit(f"amp16.fab failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
got = [float(line) for line in r.stdout.split()]


def half(t):
    return t.half().float()


def autocast_linear(m, x):
    return half(F.linear(half(x), half(m.weight), half(m.bias)))


model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
model.load_state_dict(torch.load(f"{tmp}/init.ckpt")["model"])
opt = torch.optim.Adam(model.parameters(), lr=0.01)
x = (torch.arange(128).float().view(8, 16) * 0.37).sin() * 3.0
y = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
scale, tracker = torch.tensor(65536.0), 0
want, skipped = [], []
for step in range(STEPS):
    loss = F.cross_entropy(autocast_linear(model[2], autocast_linear(model[0], x).relu()), y) * 40.0
    opt.zero_grad()
    (loss * scale).backward()
    inv = scale.double().reciprocal().float()
    found_inf = any(not torch.isfinite(p.grad).all() for p in model.parameters())
    for p in model.parameters():
        p.grad.mul_(inv)
    if step % 2 == 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    if found_inf:
        skipped.append(step)
        scale, tracker = scale * 0.5, 0
    else:
        opt.step()
        tracker += 1
        if tracker == 2000:
            scale, tracker = scale * 2.0, 0
    want.append(loss.item())

if len(got) != STEPS:
    raise SystemExit(f"expected {STEPS} losses, got {len(got)}:\n{r.stdout}")
got_skipped = [i for i in range(STEPS - 1) if got[i + 1] == got[i]]
if not skipped or got_skipped != skipped[: len(got_skipped)] or len(got_skipped) < len(skipped) - 1:
    raise SystemExit(f"skipped steps differ: fabricscript {got_skipped}, torch {skipped}")
worst = max(abs(g - w) / abs(w) for g, w in zip(got, want))
if worst > TOL:
    raise SystemExit("losses differ:\n" + "\n".join(f"{i}: {g!r} {w!r}" for i, (g, w) in enumerate(zip(got, want))))
print(f"16-mixed: steps {skipped} skipped as torch's GradScaler, {STEPS} losses within {TOL} (worst rel {worst:.1e})")
