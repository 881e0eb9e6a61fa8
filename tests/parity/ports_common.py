"""ports_common -- what the PyTorch twins of examples/ports/ share, and the
parity scripts that write their own .fab (run_script).

Each twin (tests/parity/port_*.py) runs its port with fabricscript at a
reduced size, reads the initial weights the run saved with fabric.save, and
trains the same classes in torch 1.13 on the same batches; this module reads
the Fashion-MNIST files both sides load, runs the port, parses the losses it
prints and compares them within a stated tolerance.  The drivers are
tests/parity/run-port-*.test."""
import gzip
import os
import re
import subprocess
import sys

import numpy as np
import torch

ROOT = "/usr/share/datasets/fashion-mnist"  # the runtime's FashionMNIST() default (docs/data.md)


def fashion_mnist(train, count):
    """The first `count` items: images as float32 [count, 1, 28, 28] of byte / 255 and int64
    labels, as the runtime reads them (only those bytes are decompressed)."""
    prefix = "train" if train else "t10k"
    with gzip.open(os.path.join(ROOT, f"{prefix}-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(16 + count * 784), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(os.path.join(ROOT, f"{prefix}-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(8 + count), np.uint8, offset=8)
    if len(labels) != count:
        raise SystemExit(f"FAIL: {prefix} files of {ROOT} hold fewer than {count} items")
    x = torch.from_numpy(images.astype(np.float32)) / 255.0
    return x, torch.from_numpy(labels.astype(np.int64))


def run_port(fs, port, **defines):
    """The port's standard output, run with `-D name=value` for each of defines; the run must
    exit 0."""
    srcdir = os.environ.get("srcdir", os.path.join(os.path.dirname(__file__), "..", ".."))
    path = os.path.join(srcdir, "examples", "ports", port)
    env = dict(os.environ, FABRICSCRIPT_PROGRESS="0")
    args = [arg for name, value in defines.items() for arg in ("-D", f"{name}={value}")]
    r = subprocess.run([fs, path, *args], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: {port} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r.stdout


def run_script(fs, tmp, name, script):
    """The standard output of `script` written to TMP/NAME.fab and run; the run must exit 0."""
    path = os.path.join(tmp, f"{name}.fab")
    with open(path, "w") as f:
        f.write(script)
    r = subprocess.run([fs, path], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{name}.fab failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


def numbers_after(label, text):
    """Every number printed right after `label` (e.g. "Loss: "), in order."""
    return [float(v) for v in re.findall(re.escape(label) + r"\s*(-?[0-9.]+(?:e[-+]?[0-9]+)?)", text)]


def compare(what, got, want, rtol, atol=0.0):
    """got and want agree element-wise: |g - w| <= atol + rtol * |w|."""
    print(f"{what}: fabricscript {got}")
    print(f"{what}: torch        {[round(w, 6) for w in want]}")
    if len(got) != len(want):
        raise SystemExit(f"FAIL: {what}: {len(got)} values, want {len(want)}")
    worst = max((abs(g - w) / max(abs(w), 1e-12) for g, w in zip(got, want)), default=0.0)
    bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if abs(g - w) > atol + rtol * abs(w)]
    if bad:
        raise SystemExit(f"FAIL: {what}: differ beyond rtol {rtol} atol {atol} at {bad}")
    print(f"ok   {what}: {len(got)} values within rtol {rtol} (largest relative difference {worst:.2e})")


def setup_torch():
    torch.set_num_threads(1)
    torch.manual_seed(0)  # nothing random is drawn: weights are loaded, batches read in order


if __name__ == "__main__":
    sys.exit("ports_common.py is a module for the tests/parity/ twins")
