"""A script's own Module class against the same class in torch 1.13.

Usage: class_parity.py FABRICSCRIPT TMPDIR.

A FabricScript run defines a residual MLP as classes (Blocks whose forward
writes out x + fc2(relu(fc1(x))) * scale, in a ModuleList of a Net, with a
Sequential head holding an Identity, an RMSNorm whose weight is a
Parameter, and an aux Linear whose weight is tied to the head's last), saves its
initial weights with fabric.save to a .ckpt, trains it with SGD (momentum)
for STEPS steps on data computed from arange (so torch can compute the same)
and prints each loss. Torch builds the same classes with torch.nn, loads the
weights (strict: the state-dict names must be torch's), trains the same
steps, and every loss must agree within 1e-5 relative.  A second class
checks buffers, ModuleDict and train()/eval() (SCRIPT2 below)."""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports_common import run_script  # noqa: E402

fs, tmp = sys.argv[1], sys.argv[2]
STEPS = 6

SCRIPT = f"""
class Block(Module):
    def __init__(self, d, hidden, scale):
        super().__init__()
        self.fc1 = Linear(d, hidden)
        self.fc2 = Linear(hidden, d)
        self.scale = scale

    def forward(self, x):
        return x + self.fc2(self.fc1(x).relu()) * self.scale

class RMSNorm(Module):
    def __init__(self, d):
        super().__init__()
        self.weight = Parameter(full((d,), 0.8))

    def forward(self, x):
        return x * (x.pow(2).mean(dim=-1, keepdim=True) + 1e-6).rsqrt() * self.weight

class Net(Module):
    def __init__(self, d, classes):
        super().__init__()
        self.inp = Linear(d, 12)
        self.norm = RMSNorm(12)
        self.blocks = ModuleList([Block(12, 24, 0.5) for _ in range(2)])
        self.head = Sequential(Linear(12, 12), Identity(), Linear(12, classes))
        self.aux = Linear(12, classes, bias=False)
        self.aux.weight = self.head[2].weight  # tied: one parameter

    def forward(self, x):
        h = self.inp(x).tanh()
        for block in self.blocks:
            h = block(h)
        n = self.norm(h - h.mean(dim=-1, keepdim=True))
        return self.head(n) + self.aux(n) * 0.5

fabric = Fabric(accelerator="cpu", devices=1)
fabric.seed_everything(5)
model = Net(6, 3)
fabric.save("{tmp}/init.ckpt", {{"model": model}})
model = fabric.setup_module(model)
opt = fabric.setup_optimizers(SGD(model.parameters(), lr=0.2, momentum=0.9))
x = (arange(48).float().view(8, 6) * 0.37).sin()
y = tensor([0, 1, 2, 0, 1, 2, 0, 1])
for step in range({STEPS}):
    loss = cross_entropy(model(x), y)
    opt.zero_grad()
    fabric.backward(loss)
    opt.step()
    print(repr(loss.item()))
"""


class Block(nn.Module):
    def __init__(self, d, hidden, scale):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, d)
        self.scale = scale

    def forward(self, x):
        return x + self.fc2(self.fc1(x).relu()) * self.scale


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.full((d,), 0.8))

    def forward(self, x):
        return x * (x.pow(2).mean(dim=-1, keepdim=True) + 1e-6).rsqrt() * self.weight


class Net(nn.Module):
    def __init__(self, d, classes):
        super().__init__()
        self.inp = nn.Linear(d, 12)
        self.norm = RMSNorm(12)
        self.blocks = nn.ModuleList([Block(12, 24, 0.5) for _ in range(2)])
        self.head = nn.Sequential(nn.Linear(12, 12), nn.Identity(), nn.Linear(12, classes))
        self.aux = nn.Linear(12, classes, bias=False)
        self.aux.weight = self.head[2].weight  # tied: one parameter

    def forward(self, x):
        h = self.inp(x).tanh()
        for block in self.blocks:
            h = block(h)
        n = self.norm(h - h.mean(dim=-1, keepdim=True))
        return self.head(n) + self.aux(n) * 0.5


got = [float(line) for line in run_script(fs, tmp, "class", SCRIPT).split()]

model = Net(6, 3)
model.load_state_dict(torch.load(f"{tmp}/init.ckpt")["model"])
opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
x = (torch.arange(48).float().view(8, 6) * 0.37).sin()
y = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
want = []
for step in range(STEPS):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    want.append(loss.item())



def compare(what, got, want):
    bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if abs(g - w) > 1e-5 * max(abs(w), 1e-6)]
    print("fabricscript:", got)
    print("torch:       ", want)
    if len(got) != len(want) or bad:
        raise SystemExit(f"FAIL: {what}: differ at {bad}" if bad else f"FAIL: {what}: {len(got)} values, want {len(want)}")


compare("losses", got, want)
print(f"ok   a script Module class trains as torch's: {STEPS} losses within 1e-5")

# Buffers, ModuleDict and train()/eval(): a class keeps a running mean in a
# persistent buffer it reassigns in forward while training, and a step count
# in a non-persistent one (not in the checkpoint: torch's strict load would
# refuse an unexpected key); a BatchNorm1d keeps its running statistics;
# heads live in a ModuleDict.  Training steps, then the loss in eval mode
# (running statistics used, buffers left alone), then every buffer of the
# final checkpoint.
SCRIPT2 = f"""
class Stats(Module):
    def __init__(self, d):
        super().__init__()
        self.register_buffer("mean", zeros(d))
        self.register_buffer("steps", zeros(1), persistent=False)

    def forward(self, x):
        if self.training:
            self.mean = self.mean * 0.9 + x.detach().mean(dim=0) * 0.1
            self.steps = self.steps + 1
        return x - self.mean

class Net2(Module):
    def __init__(self):
        super().__init__()
        self.stats = Stats(6)
        self.bn = BatchNorm1d(6)
        self.heads = ModuleDict({{"cls": Linear(6, 3), "aux": Sequential(Linear(6, 4), Tanh(), Linear(4, 3))}})

    def forward(self, x):
        h = self.bn(self.stats(x))
        return self.heads["cls"](h) + self.heads["aux"](h) * 0.5

fabric = Fabric(accelerator="cpu", devices=1)
fabric.seed_everything(3)
model = Net2()
fabric.save("{tmp}/init2.ckpt", {{"model": model}})
model = fabric.setup_module(model)
opt = fabric.setup_optimizers(SGD(model.parameters(), lr=0.1, momentum=0.9))
x = (arange(48).float().view(8, 6) * 0.53).cos() * 2 + 0.5
y = tensor([0, 1, 2, 0, 1, 2, 0, 1])
for step in range({STEPS}):
    loss = cross_entropy(model(x), y)
    opt.zero_grad()
    fabric.backward(loss)
    opt.step()
    print(repr(loss.item()))
model.eval()
print(repr(cross_entropy(model(x), y).item()))
print(repr(model.stats.steps.item()))
fabric.save("{tmp}/final2.ckpt", {{"model": model}})
"""


class Stats(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.register_buffer("mean", torch.zeros(d))
        self.register_buffer("steps", torch.zeros(1), persistent=False)

    def forward(self, x):
        if self.training:
            self.mean = self.mean * 0.9 + x.detach().mean(dim=0) * 0.1
            self.steps = self.steps + 1
        return x - self.mean


class Net2(nn.Module):
    def __init__(self):
        super().__init__()
        self.stats = Stats(6)
        self.bn = nn.BatchNorm1d(6)
        self.heads = nn.ModuleDict({"cls": nn.Linear(6, 3), "aux": nn.Sequential(nn.Linear(6, 4), nn.Tanh(), nn.Linear(4, 3))})

    def forward(self, x):
        h = self.bn(self.stats(x))
        return self.heads["cls"](h) + self.heads["aux"](h) * 0.5


got = [float(line) for line in run_script(fs, tmp, "buffers", SCRIPT2).split()]

model = Net2()
model.load_state_dict(torch.load(f"{tmp}/init2.ckpt")["model"])
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
x = (torch.arange(48).float().view(8, 6) * 0.53).cos() * 2 + 0.5
want = []
for step in range(STEPS):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    want.append(loss.item())
model.eval()
with torch.no_grad():
    want.append(F.cross_entropy(model(x), y).item())
want.append(model.stats.steps.item())
compare("losses (train, then eval) and the step count", got, want)
final = torch.load(f"{tmp}/final2.ckpt")["model"]
mine = model.state_dict()
if sorted(final) != sorted(mine):
    raise SystemExit(f"FAIL: checkpoint keys {sorted(final)}, torch's {sorted(mine)}")
for k in mine:
    compare(k, final[k].double().flatten().tolist(), mine[k].double().flatten().tolist())
print(f"ok   buffers (persistent or not), BatchNorm statistics, ModuleDict and eval(): as torch's")
