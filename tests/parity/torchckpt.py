"""PyTorch 1.13 and runtime/io/torchckpt.c read each other's checkpoints.

Usage: torchckpt.py DRIVER TMPDIR. Both sides print a value as the same
canonical JSON (torchckpt_driver.c's put_value; canon() here): floats and
tensor elements as bit patterns, so equal means identical. Torch writes a
Linear stack's state dict, an Adam state dict after two steps, nested
containers, bfloat16/int64/float32 tensors and views sharing one storage
(slices, a transpose, a stride-0 expand); the driver reads them. The driver
writes its two values; torch.load reads them (weights_only=True for the one
without floats: torch 1.13's weights_only unpickler refuses BINFLOAT) and
must see the storages shared as written, and the zip laid out as torch
lays it out (member order, 64-byte aligned data)."""
import json
import struct
import subprocess
import sys
import zipfile
from collections import OrderedDict

import torch
import torch.nn as nn

driver, tmp = sys.argv[1], sys.argv[2]
failed = []


def tensor_values(t):
    t = t.detach().contiguous()
    if t.dtype == torch.float32:
        return ["%08x" % (v & 0xFFFFFFFF) for v in t.view(torch.int32).flatten().tolist()]
    if t.dtype == torch.bfloat16:
        return ["%04x" % (v & 0xFFFF) for v in t.view(torch.int16).flatten().tolist()]
    assert t.dtype == torch.int64, t.dtype
    return t.flatten().tolist()


def canon(x):
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, float):
        return {"float": struct.pack(">d", x).hex()}
    if isinstance(x, tuple):
        return {"tuple": [canon(v) for v in x]}
    if isinstance(x, list):
        return [canon(v) for v in x]
    if isinstance(x, dict):
        return {"dict": [[canon(k), canon(v)] for k, v in x.items()], "ordered": isinstance(x, OrderedDict)}
    if isinstance(x, torch.Tensor):
        name = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.int64: "int64"}[x.dtype]
        return {"tensor": name, "shape": list(x.shape), "values": tensor_values(x)}
    raise TypeError(type(x))


def driver_json(*args):
    r = subprocess.run([driver, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"torchckpt_driver {' '.join(args)} failed: {r.stderr}")
    return json.loads(r.stdout)


def check(name, got, want):
    if got != want:
        failed.append(name)
        print(f"FAIL {name}:\n  runtime: {json.dumps(got)[:2000]}\n  torch:   {json.dumps(want)[:2000]}")
    else:
        print(f"ok   {name}")


# --- torch writes, the runtime reads ---------------------------------------
torch.manual_seed(0)
mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.Adam(mlp.parameters(), lr=1e-3)
for _ in range(2):
    opt.zero_grad()
    mlp(torch.randn(5, 4)).square().mean().backward()
    opt.step()
base = torch.arange(24, dtype=torch.float32) * 0.25 - 3
written = {
    "mlp_state_dict": mlp.state_dict(),
    "adam_state_dict": opt.state_dict(),
    "nested": {"a": [1, -(2 ** 40), 2 ** 63 - 1, 3.5, float("-inf"), "caf\u00e9", True, None, (1, "x"), []],
               "b": {"c": (), 7: {}, (1, 2): "tuple key", None: 0.1},
               "step": 10, "empty": OrderedDict()},
    "dtypes": {"bf16": torch.tensor([1.5, -2, 3e38, float("nan")], dtype=torch.bfloat16),
               "i64": torch.tensor([[1, -2], [2 ** 62, -(2 ** 63)]]),
               "f32": torch.randn(3, 4), "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 3)},
    "shared_storage": {"whole": base, "slice": base[4:10], "matrix": base.view(4, 6),
                       "transposed": base.view(4, 6).t(), "every_fifth": base[::5],
                       "column": base.view(4, 6)[:, 2], "expanded": base[:2].expand(3, 2)},
}
for name, obj in written.items():
    path = f"{tmp}/{name}.pt"
    torch.save(obj, path)
    check(f"torch.save -> runtime: {name}", driver_json("read", path), canon(obj))

# --- the runtime writes, torch reads ---------------------------------------
for kind in ("weights", "full"):
    path = f"{tmp}/runtime_{kind}.pt"
    want = driver_json("write", path, kind)
    obj = torch.load(path, weights_only=(kind == "weights"))
    check(f"runtime -> torch.load(weights_only={kind == 'weights'}): {kind}", canon(obj), want)
    shared = obj["misc"][-1]["fc.weight"].storage().data_ptr() == obj["model"]["fc.weight"].storage().data_ptr()
    check(f"runtime -> torch.load: {kind}: a tensor saved twice shares its storage", shared, True)
    # the layout torch writes for the same value: same member order, aligned data
    again = f"{tmp}/torch_{kind}.pt"
    torch.save(obj, again)

    def layout(p):
        with zipfile.ZipFile(p) as z:
            names = [i.filename.split("/", 1)[1] for i in z.infolist()]
            raw = open(p, "rb").read()
            misaligned = [i.filename for i in z.infolist()
                          if (i.header_offset + 30 + len(i.filename)
                              + int.from_bytes(raw[i.header_offset + 28:i.header_offset + 30], "little")) % 64]
            return [n for n in names if n != "byteorder"], misaligned, {i.compress_type for i in z.infolist()}
    check(f"runtime's zip layout is torch's: {kind}", layout(path), layout(again))

if kind == "full":
    try:
        torch.load(f"{tmp}/runtime_full.pt", weights_only=True)
        print("note: this torch's weights_only loader reads floats")
    except Exception as e:  # torch 1.13: "Unsupported operand 71" (BINFLOAT)
        print(f"note: torch {torch.__version__} weights_only refuses floats, as for its own files: {str(e)[-40:]}")

if failed:
    print(f"{len(failed)} checkpoint parity check(s) failed")
    sys.exit(1)
print(f"all {len(written) + 6} checkpoint parity checks passed")
