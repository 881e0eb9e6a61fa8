"""Replays the cases of tests/parity/layers.fab (layers and losses) or
tests/parity/ops.fab (the tensor API's ops) in PyTorch 1.13 and compares.

Usage: layers.py OUTPUT  (the stdout of `fabricscript tests/parity/X.fab`).
For each case: the inputs as fabricscript printed them (exact float32 values),
its torch expression evaluated on them, and then forward (OUT), the running
statistics changed in place (POST), and the gradients of sum(out * R) (GRAD)
must agree within TOL of the reference's largest magnitude (at least 1), or
the case's own TOL line's (low_ops.fab: TOL 0, the same dtype and bits)."""
import ast
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

TOL = 2e-5
DTYPES = {"torch.float32": torch.float32, "torch.int64": torch.int64, "torch.bool": torch.bool,
          "torch.bfloat16": torch.bfloat16, "torch.float16": torch.float16}


def tensor_of(dtype, shape, values):
    return torch.tensor(values, dtype=DTYPES[dtype]).reshape(shape)


def parse(path):
    cases, cur = [], None
    for line in open(path):
        tag, _, rest = line.rstrip("\n").partition(" ")
        if tag == "CASE":
            cur = {"name": rest, "in": {}, "grad": {}, "post": {}}
            cases.append(cur)
        elif tag == "EXPR":
            cur["expr"] = rest
        elif tag == "TOL":
            cur["tol"] = float(rest)
        elif tag in ("IN", "GRAD", "POST"):
            name, _, rest = rest.partition(" ")
            dtype, _, rest = rest.partition(" ")
            shape, _, values = rest.partition(") ")
            cur[tag.lower()][name] = tensor_of(dtype, ast.literal_eval(shape + ")"), ast.literal_eval(values))
        elif tag in ("OUT", "R"):
            dtype, _, rest = rest.partition(" ")
            shape, _, values = rest.partition(") ")
            cur[tag.lower()] = tensor_of(dtype, ast.literal_eval(shape + ")"), ast.literal_eval(values))
    return cases


def close(want, got, tol=TOL):
    if tuple(want.shape) != tuple(got.shape):
        return f"shape {tuple(got.shape)} != torch's {tuple(want.shape)}"
    if want.dtype != got.dtype:
        return f"dtype {got.dtype} != torch's {want.dtype}"
    if tol == 0:  # bit for bit (NaN where torch has NaN)
        w, g = want.double(), got.double()
        bad = ~((w == g) | (w.isnan() & g.isnan())) | (w.signbit() != g.signbit())
        n = int(bad.sum())
        return None if n == 0 else f"{n} of {want.numel()} elements differ (max {(w - g).abs().max().item():.3g})"
    scale = max(1.0, want.abs().max().item()) if want.numel() else 1.0
    err = (want.double() - got.double()).abs().max().item() if want.numel() else 0.0
    return None if err <= tol * scale else f"max error {err:.3g} (scale {scale:.3g})"


def main():
    cases = parse(sys.argv[1])
    failed = 0
    for c in cases:
        env = {"F": F, "nn": nn, "torch": torch}
        for name, t in c["in"].items():
            t = t.clone()
            if name in c["grad"]:
                t.requires_grad_()
            env[name] = t
        post_before = {name: env[name] for name in c["post"]}
        out = eval(c["expr"], env)
        problems = []
        tol = c.get("tol", TOL)
        why = close(out.detach(), c["out"], tol)
        if why:
            problems.append("forward: " + why)
        for name, got in c["post"].items():
            why = close(post_before[name], got)
            if why:
                problems.append(f"{name} after the call: " + why)
        if c["grad"] and tuple(out.shape) == tuple(c["out"].shape):
            (out * c["r"]).sum().backward()
            for name, got in c["grad"].items():
                why = close(env[name].grad, got, tol)
                if why:
                    problems.append(f"d{name}: " + why)
        status = "FAIL" if problems else "ok"
        failed += bool(problems)
        print(f"{status:4} {c['name']}" + ("".join("\n     " + p for p in problems)))
    print(f"{len(cases) - failed} of {len(cases)} cases agree with torch {torch.__version__}")
    return 1 if failed or not cases else 0


sys.exit(main())
