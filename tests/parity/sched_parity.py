"""Replays sched_driver's schedules in PyTorch 1.13 and compares.

Usage: sched_parity.py LRS.txt  (the output of sched_driver).
Each case is the same scheduler, options and two parameter groups (lr 0.1
and 0.02) as sched_driver.c's; every one of the 1,001 learning rates (and
OneCycleLR's momenta) must be equal to torch's: tolerance 0, since both
sides evaluate the same double expressions in the same order."""
import math
import sys
import warnings

import torch
from torch.optim import lr_scheduler as S

STEPS = 1000


def groups(opt_cls=torch.optim.SGD, **kw):
    p, q = torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))
    return opt_cls([{"params": [p], "lr": 0.1}, {"params": [q], "lr": 0.02}], **kw)


def metric(e):
    m = e if e < 300 else 300
    return 1.0 / (1 + m) + ((e * 7919) % 13) * 1e-4


def cases():
    yield "StepLR", lambda o: S.StepLR(o, step_size=30, gamma=0.1), None
    yield "MultiStepLR", lambda o: S.MultiStepLR(o, milestones=[500, 30, 80, 80], gamma=0.5), None
    yield "ExponentialLR", lambda o: S.ExponentialLR(o, gamma=0.99), None
    yield "CosineAnnealingLR", lambda o: S.CosineAnnealingLR(o, T_max=100, eta_min=0.001), None
    yield "CosineAnnealingWarmRestarts", lambda o: S.CosineAnnealingWarmRestarts(o, T_0=10, T_mult=2, eta_min=1e-4), None
    yield "CosineAnnealingWarmRestarts1", lambda o: S.CosineAnnealingWarmRestarts(o, T_0=7), None
    yield "LinearLR", lambda o: S.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=100), None
    yield "ConstantLR", lambda o: S.ConstantLR(o, factor=0.5, total_iters=40), None
    yield "LambdaLR", lambda o: S.LambdaLR(o, lambda e: 0.95 ** e), None
    yield "LambdaLR2", lambda o: S.LambdaLR(o, [lambda e: min(1.0, (e + 1) / 100), lambda e: 0.95 ** e]), None
    yield "OneCycleLR", lambda o: S.OneCycleLR(o, max_lr=[0.1, 0.05], total_steps=STEPS), "momentum"
    yield ("OneCycleLR3", lambda o: S.OneCycleLR(o, max_lr=[0.1, 0.05], epochs=10, steps_per_epoch=100,
                                                  pct_start=0.25, anneal_strategy="linear", three_phase=True),
           "betas")

    def sequential(o):
        return S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, end_factor=1.0, total_iters=50),
                                  S.CosineAnnealingLR(o, T_max=950)], milestones=[50])
    yield "SequentialLR", sequential, None
    yield ("ReduceLROnPlateau", lambda o: S.ReduceLROnPlateau(o, factor=0.5, patience=5, cooldown=2,
                                                              min_lr=[1e-5, 0]), "plateau")
    yield ("ReduceLROnPlateauMaxAbs", lambda o: S.ReduceLROnPlateau(o, mode="max", factor=0.5, patience=3,
                                                                    threshold=1e-3, threshold_mode="abs",
                                                                    min_lr=[1e-5, 0]), "plateau max")


def rows(name, make, how):
    opt = groups(torch.optim.Adam) if how == "betas" else groups(momentum=0.9)
    sched = make(opt)

    def row():
        vals = [g["lr"] for g in opt.param_groups]
        if how == "momentum":
            vals += [g["momentum"] for g in opt.param_groups]
        elif how == "betas":
            vals += [g["betas"][0] for g in opt.param_groups]
        return vals
    out = [row()]
    for e in range(STEPS):
        opt.step()
        if how and how.startswith("plateau"):
            sched.step(-metric(e) if how.endswith("max") else metric(e))
        else:
            sched.step()
        out.append(row())
    return out


def main(path):
    ours, name = {}, None
    for line in open(path):
        if line.startswith("case "):
            name = line.split()[1]
            ours[name] = []
        else:
            ours[name].append([float(x) for x in line.split()])
    bad = 0
    for name, make, how in cases():
        want = rows(name, make, how)
        got = ours.get(name)
        if got is None or len(got) != len(want):
            print(f"{name}: fabricscript has {0 if got is None else len(got)} rows, torch {len(want)}")
            bad += 1
            continue
        for step, (w, g) in enumerate(zip(want, got)):
            if w != g:
                print(f"{name} step {step}: torch {w!r} fabricscript {g!r}")
                bad += 1
                break
    total = len(list(cases()))
    print(f"schedulers: {total - bad} of {total} agree with torch to the last bit for {STEPS} steps")
    return 1 if bad else 0


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    sys.exit(main(sys.argv[1]))
