"""Replays optim_driver's runs in PyTorch 1.13 and compares step for step.

Usage: optim_parity.py OUTDIR  (after `optim_driver OUTDIR`).
Each case builds torch's optimizer with the same options and two parameter
groups as optim_driver.c, feeds the same gradients, and requires both
parameters after every one of the 20 steps to equal fabricscript's bit for
bit (tolerance 0): the runtime replays torch's CPU kernels' rounding,
fused multiply-adds included (backend_cpu.c)."""
import os
import sys

import torch

N0, N1, STEPS = 37, 1000, 20
O = torch.optim

CASES = {
    "sgd": (O.SGD, dict(lr=0.1), 0),
    "sgd_momentum": (O.SGD, dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=1e-2), 0.1),
    "sgd_nesterov": (O.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2), 0),
    "sgd_maximize": (O.SGD, dict(lr=0.1, momentum=0.9, weight_decay=1e-2, maximize=True), 0),
    "adam": (O.Adam, dict(), 0),
    "adam_amsgrad": (O.Adam, dict(betas=(0.8, 0.999), eps=1e-6, weight_decay=1e-2, amsgrad=True), 0.1),
    "adamw": (O.AdamW, dict(weight_decay=0.1), 0),
    "adamw_amsgrad_maximize": (O.AdamW, dict(weight_decay=0.1, amsgrad=True, maximize=True), 0.01),
    "rmsprop": (O.RMSprop, dict(), 0),
    "rmsprop_centered_momentum": (O.RMSprop, dict(alpha=0.9, momentum=0.9, centered=True, weight_decay=1e-2), 0),
    "adagrad": (O.Adagrad, dict(lr=0.1), 0),
    "adagrad_decay": (O.Adagrad, dict(lr=0.1, lr_decay=1e-2, weight_decay=1e-2, initial_accumulator_value=0.1,
                                      maximize=True), 0),
    "adadelta": (O.Adadelta, dict(), 0),
    "adadelta_decay_maximize": (O.Adadelta, dict(rho=0.8, eps=1e-4, weight_decay=1e-2, maximize=True), 0),
}


def check(path, cls, kw, wd1):
    flat = torch.frombuffer(bytearray(open(path, "rb").read()), dtype=torch.float32)
    off = 0

    def take(n):
        nonlocal off
        t = flat[off: off + n].clone()
        off += n
        return t
    p = [torch.nn.Parameter(take(N0)), torch.nn.Parameter(take(N1))]
    defaults = {"lr": 0.1} if cls is O.SGD else {}
    lr0 = kw.get("lr", defaults.get("lr", cls.__init__.__defaults__[0]))
    opt = cls([{"params": [p[0]]}, {"params": [p[1]], "lr": lr0 * 0.5, "weight_decay": wd1}], **kw)
    for step in range(STEPS):
        has1 = take(1).item() == 1.0
        p[0].grad = take(N0)
        p[1].grad = take(N1) if has1 else None
        if step == 10:
            for g in opt.param_groups:
                g["lr"] *= 0.5
        opt.step()
        for k, n in ((0, N0), (1, N1)):
            ours = take(n)
            if not torch.equal(ours, p[k].detach()):
                diff = (ours - p[k].detach()).abs().max().item()
                return f"step {step} p{k}: differs from torch by up to {diff:.3g}"
    return None


def main(outdir):
    bad = 0
    for name, (cls, kw, wd1) in CASES.items():
        err = check(os.path.join(outdir, name + ".bin"), cls, kw, wd1)
        if err:
            print(f"{name}: {err}")
            bad += 1
    print(f"optimizers: {len(CASES) - bad} of {len(CASES)} cases equal torch's parameters bit for bit "
          f"after each of {STEPS} steps")
    return 1 if bad else 0


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main(sys.argv[1]))
