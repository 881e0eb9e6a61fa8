"""fabric.save / fabric.load in PyTorch's format, end to end against torch 1.13.

Usage: fabric_ckpt.py FABRICSCRIPT TMPDIR.

1. A FabricScript run trains an MLP with Adam for 3 steps, saves model and
   optimizer to a .ckpt and to a .safetensors, trains 3 more steps and prints
   every loss. Torch loads the .ckpt: every tensor, lr and step must equal the
   .safetensors' bit for bit, and torch's MLP and Adam restored from it must
   continue with the run's losses.
2. Torch trains the same MLP 2 steps and writes torch.save({"model": ...,
   "optimizer": ..., "step": 5}) and a bare model state dict. A FabricScript
   run loads them (fabric.load, fabric.load_raw) and must continue with
   torch's losses.
3. The caveat of torch 1.13: its weights_only unpickler has no BINFLOAT, so
   it refuses the run's .ckpt exactly as it refuses torch's own optimizer
   checkpoint; torch.load(path) reads both. Every opcode and global of the
   run's pickle is one torch's weights_only unpickler handles, BINFLOAT aside
   (which torch >= 2.0's handles), and a checkpoint without floats loads with
   weights_only=True."""
import json
import os
import pickletools
import struct
import sys
import zipfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import _weights_only_unpickler as wo

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports_common import run_script  # noqa: E402

fs, tmp = sys.argv[1], sys.argv[2]
failed = []
STEPS = 3


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail))
    if not ok:
        failed.append(name)


def run(script, name):
    return run_script(fs, tmp, name, script).splitlines()


MODEL = """
model MLP():
    fc1 = Linear(8, 16)
    ReLU()
    fc2 = Linear(16, 4)

fabric = Fabric(accelerator="cpu", devices=1)
fabric.seed_everything(3)
model = fabric.setup_module(MLP())
optimizer = fabric.setup_optimizers(Adam(model.parameters(), lr=0.01))
batches = []
for x, y in DataLoader(RandomDataset(96, 8, 4, 0), batch_size=16):
    batches.append((x, y))

def train(first, last):
    for i in range(first, last):
        x, y = batches[i]
        loss = cross_entropy(model(x), y)
        optimizer.zero_grad()
        fabric.backward(loss)
        optimizer.step()
        print(repr(loss.item()))
"""


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def torch_train(mlp, opt, batches):
    losses = []
    for x, y in batches:
        loss = F.cross_entropy(mlp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def close(a, b):
    return len(a) == len(b) and all(abs(x - y) <= 1e-5 * max(1.0, abs(y)) for x, y in zip(a, b))


def safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    dt = {"F32": torch.float32, "I64": torch.int64, "BF16": torch.bfloat16}
    tensors = {}
    for k, e in header.items():
        b, end = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:end]), dtype=dt[e["dtype"]]) if end > b else torch.empty(0)
        tensors[k] = t.reshape(e["shape"])
    return tensors, meta


def flatten(prefix, x, out):
    if isinstance(x, dict):
        for k, v in x.items():
            flatten(f"{prefix}.{k}", v, out)
    elif isinstance(x, list) and any(isinstance(v, dict) for v in x):
        for i, v in enumerate(x):
            flatten(f"{prefix}.{i}", v, out)
    else:
        out[prefix] = x


# --- 1. FabricScript saves, torch loads and continues -----------------------
ck, st, data = f"{tmp}/run.ckpt", f"{tmp}/run.safetensors", f"{tmp}/data.pt"
lines = run(MODEL + f"""
train(0, {STEPS})
fabric.save("{ck}", {{"model": model, "optimizer": optimizer, "step": {STEPS}}})
fabric.save("{st}", {{"model": model, "optimizer": optimizer, "step": {STEPS}}})
fabric.save("{data}", {{"batches": batches}})
train({STEPS}, {2 * STEPS})
""", "save")
run_losses = [float(v) for v in lines]
batches = torch.load(data, weights_only=True)["batches"]
check("the batches load with weights_only=True", len(batches) == 6 and batches[0][0].shape == (16, 8))
saved = torch.load(ck)
check("the .ckpt holds Lightning's checkpoint", sorted(saved) == ["model", "optimizer", "step"] and saved["step"] == STEPS,
      str(saved.keys()))
want = MLP().state_dict()
check("the model's state dict has torch's names and shapes",
      list(saved["model"]) == list(want) and all(saved["model"][k].shape == want[k].shape for k in want))
flat = {}
for key in ("model", "optimizer"):
    flatten(key, saved[key], flat)
sft, meta = safetensors(st)
same = sorted(k for k, v in flat.items() if isinstance(v, torch.Tensor)) == sorted(sft)
for k in sft:
    same = same and flat.get(k) is not None and flat[k].dtype == sft[k].dtype and torch.equal(flat[k], sft[k])
check("every tensor of the .ckpt equals the .safetensors' bit for bit", same, f"{sorted(flat)} vs {sorted(sft)}")
check("lr and hyperparameters are the safetensors' metadata",
      all(repr(flat[k]) == meta.get(k) for k in flat if not isinstance(flat[k], torch.Tensor)),
      str({k: (flat[k], meta.get(k)) for k in flat if not isinstance(flat[k], torch.Tensor)}))
mlp = MLP()
opt = torch.optim.Adam(mlp.parameters(), lr=0.5)
mlp.load_state_dict(saved["model"])
opt.load_state_dict(saved["optimizer"])
check("torch's Adam restored: lr and step", opt.param_groups[0]["lr"] == 0.01 and
      all(s["step"].item() == STEPS for s in opt.state.values()))
cont = torch_train(mlp, opt, batches[STEPS:])
check("torch continues the run with its losses", close(cont, run_losses[STEPS:]), f"{cont} vs {run_losses[STEPS:]}")

# --- 3. what torch 1.13's weights_only loader says ---------------------------
def refusal(path):
    try:
        torch.load(path, weights_only=True)
        return None
    except Exception as e:  # pickle.UnpicklingError
        return str(e).split("WeightsUnpickler error: ")[-1]


theirs = f"{tmp}/torch_adam.pt"
torch.save({"model": mlp.state_dict(), "optimizer": opt.state_dict(), "step": STEPS}, theirs)
check("1.13's weights_only refuses the .ckpt as it refuses torch's own (BINFLOAT)",
      refusal(ck) is not None and refusal(ck) == refusal(theirs), f"{refusal(ck)!r} vs {refusal(theirs)!r}")
with zipfile.ZipFile(ck) as z:
    pkl = z.read(next(n for n in z.namelist() if n.endswith("/data.pkl")))
handled = {"PROTO", "STOP", "MARK", "NONE", "NEWTRUE", "NEWFALSE", "BININT", "BININT1", "BININT2", "LONG1",
           "BINUNICODE", "SHORT_BINSTRING", "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "EMPTY_LIST",
           "APPEND", "APPENDS", "EMPTY_DICT", "SETITEM", "SETITEMS", "BINGET", "LONG_BINGET", "BINPUT",
           "LONG_BINPUT", "GLOBAL", "REDUCE", "NEWOBJ", "BUILD", "BINPERSID"}
ops = {op.name for op, arg, pos in pickletools.genops(pkl)}
globs = {arg.replace(" ", ".") for op, arg, pos in pickletools.genops(pkl) if op.name == "GLOBAL"}
check("the .ckpt uses only what weights_only handles, plus BINFLOAT", ops - handled == {"BINFLOAT"}
      and globs <= set(wo._get_allowed_globals()), f"{ops - handled} {globs - set(wo._get_allowed_globals())}")
check("torch.load(path, weights_only=True) reads a .ckpt without floats",
      torch.load(data, weights_only=True) is not None)

# --- 2. torch saves, FabricScript loads and continues ------------------------
torch.manual_seed(7)
mlp = MLP()
opt = torch.optim.Adam(mlp.parameters(), lr=0.01)
torch_train(mlp, opt, batches[:2])
full, raw = f"{tmp}/torch.ckpt", f"{tmp}/torch_model.pt"
torch.save({"model": mlp.state_dict(), "optimizer": opt.state_dict(), "step": 5}, full)
torch.save(mlp.state_dict(), raw)
cont = torch_train(mlp, opt, batches[2:2 + STEPS])
lines = run(MODEL + f"""
rest = fabric.load("{full}", {{"model": model, "optimizer": optimizer}})
print(rest)
train(2, {2 + STEPS})
other = fabric.setup_module(MLP())
fabric.load_raw("{raw}", other)
x, y = batches[0]
print(repr(cross_entropy(other(x), y).item()))
""", "load")
check("fabric.load returns what the state did not take", lines[0] == "{'step': 5}", lines[0])
fs_losses = [float(v) for v in lines[1:1 + STEPS]]
check("FabricScript continues torch's run with its losses", close(fs_losses, cont), f"{fs_losses} vs {cont}")
mlp.load_state_dict(torch.load(raw))
with torch.no_grad():
    want = F.cross_entropy(mlp(batches[0][0]), batches[0][1]).item()
check("load_raw of a bare state dict", close([float(lines[-1])], [want]), f"{lines[-1]} vs {want}")

if failed:
    raise SystemExit(f"{len(failed)} check(s) failed: {', '.join(failed)}")
