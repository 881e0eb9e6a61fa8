#!/usr/bin/env python3
"""differential.py -- check agrees with run: every runnable regression
script, and random valid scripts over the Fabric API, go through

    fabricscript check --here --diagnostics-format=json [ARGS] FILE
    fabricscript [ARGS] --diagnostics-format=json FILE

(--here: the check for the machine the run runs on, as a run checks; a
plain check checks for the machine the script declares) and each rule
diagnostic (an R/W rule id, or `unsupported`) must fire in
both, at the same line and column, with the same message.  What a run
never reaches cannot fire in it: once the run stops at an error, the
check's diagnostics after that error's line are not compared (the check
goes on past an error, the run does not).  A run-time error in which the
runtime refuses something ("not supported", "this build runs ...") counts
as a rule of its own: check must have reported `unsupported` instead.

    differential.py [--scripts DIR] [--seed N] [--seconds S]

--scripts: the regression scripts (`# mode: check` and `# mode: plan`
ones are skipped: they never run); --seed and --seconds bound the
generator (FABRICSCRIPT_DIFF_SEED, FABRICSCRIPT_DIFF_SECONDS; default seed
1, 20 seconds); a disagreement prints both sides and the script (a
generated one is written next to the report as diff-N.fab).  Prints the
counts; exit status 1 on a disagreement.  The binary is $FABRICSCRIPT
(./fabricscript)."""
import json
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile
import time

RULE = re.compile(r"^(R[0-9]+|W[0-9]+|unsupported)$")
# A run-time error in which the runtime says it cannot do something (not a
# Python error of the script): rule `unsupported` by another name, which a
# check that accepts the script has missed.
REFUSAL = re.compile(r"not supported( at run time)? yet|this build (runs|computes|cannot|has)")
FS = os.environ.get("FABRICSCRIPT", "./fabricscript")
TIMEOUT = 120


def annotations(text):
    """The script's `# args:` options and `# mode:`, as the test runner reads them."""
    args, mode = [], "run"
    for line in text.splitlines():
        m = re.match(r"^\s*#\s*args:(.*)$", line)
        if m:
            args += shlex.split(m.group(1))
        m = re.match(r"^\s*#\s*mode:\s*(\S+)", line)
        if m:
            mode = m.group(1)
    return args, mode


def diagnostics(cmd):
    """The rule diagnostics of one command (a set: every rank reports its
    own), the line of the first error of any kind (None: none), the status
    (or the lines of standard error that are not JSON, a failure)."""
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=TIMEOUT, start_new_session=True)
    except subprocess.TimeoutExpired:
        return None, None, "timed out"
    rules, refusals, junk, first_error = set(), set(), [], None
    for line in p.stderr.decode("utf-8", "replace").splitlines():
        try:
            d = json.loads(line)
        except ValueError:  # a sanitizer report, a crash: as the test runner, a failure
            junk.append(line[:200])
            continue
        if d.get("severity") == "error" and first_error is None:
            first_error = d.get("line") or 0
        if RULE.match(str(d.get("rule"))):
            rules.add((d.get("line"), d.get("column"), d["severity"], d["rule"], d["message"]))
        elif d.get("severity") == "error" and REFUSAL.search(d.get("message", "")):
            refusals.add((d.get("line"), d.get("column"), d["message"]))
    junk = ["stderr line not JSON: " + j for j in junk]
    return rules | {(r[0], r[1], "error", "refusal", r[2]) for r in refusals}, first_error, junk or p.returncode


def compare(path, args):
    """(rules agreeing, disagreements as text)."""
    checked, _, cs = diagnostics([FS, "check", "--here", "--diagnostics-format=json"] + args + [path])
    ran, stop, rs = diagnostics([FS] + args + ["--diagnostics-format=json", path])
    if checked is None or ran is None:
        return 0, ["%s: check %s, run %s" % (path, cs, rs)]
    bad = ["%s: %s" % (path, j) for j in (cs if isinstance(cs, list) else []) + (rs if isinstance(rs, list) else [])]
    for d in sorted(ran - checked, key=str):
        bad.append("%s:%s:%s: only the run reports %s[%s]: %s" % (path, d[0], d[1], d[2], d[3], d[4]))
    for d in sorted(checked - ran, key=str):
        if stop is not None and (d[0] or 0) > stop:
            continue  # past where the run stopped
        bad.append("%s:%s:%s: only check reports %s[%s]: %s" % (path, d[0], d[1], d[2], d[3], d[4]))
    return len(checked & ran), bad


# ---- the generator ----------------------------------------------------------------------

STRATEGIES = [("cpu", "auto", 1), ("cpu", "ddp", 2), ("cpu", "ddp", 1), ("cuda", "fsdp", 2), ("cuda", "ddp", 2),
              ("cuda", "auto", 1), ("cpu", "fsdp", 2), ("cpu", "ddp_spawn", 2), ("cpu", "dp", 2)]
PRECISIONS = ["32-true"] * 9 + ["16-mixed", "bf16-mixed", "64-true"]
OPTIMIZERS = ["SGD(model.parameters(), lr=0.1)", "Adam(model.parameters(), lr=0.01)",
              "AdamW(model.parameters(), lr=0.01)"]


def generate(rng, path):
    """A script that uses the Fabric API in a random order: every name is
    defined before it is used, so what fires is Fabric's rules (or none)."""
    accel, strategy, devices = rng.choice(STRATEGIES)
    precision = rng.choice(PRECISIONS)
    cli = rng.random() < 0.1  # as `fabric run --devices=2` starts it (launch() is then an error)
    out = ["model Net():", "    Linear(4, 8)", "    ReLU()", "    Linear(8, 3)", ""]
    out.append('fabric = Fabric(accelerator="%s", strategy="%s", %sprecision="%s")'
               % (accel, strategy, "" if cli else "devices=%d, " % devices, precision))
    launch_at = rng.choice(["start", "start", "after_model", "after_setup", "never", "function", "function_args"])
    if cli and rng.random() < 0.7:
        launch_at = "never"
    if launch_at.startswith("function"):
        out.append("def train(fabric%s):" % (", lr, steps=1" if launch_at == "function_args" else ""))
        indent = "    "
    else:
        indent = ""
    body = []
    if launch_at == "start":
        body.append("fabric.launch()")
    init = rng.choice(["plain", "plain", "init_module", "init_module_empty"])
    if init == "plain":
        body.append("model = Net()")
    else:
        body.append("with fabric.init_module(%s):" % ("empty_init=True" if init == "init_module_empty" else ""))
        body.append("    model = Net()")
    if launch_at == "after_model":
        body.append("fabric.launch()")
    setup = rng.choice(["joint", "separate", "separate_reversed", "module_only", "optimizer_first"])
    optimizer = rng.choice(OPTIMIZERS)
    if setup == "joint":
        body.append("optimizer = " + optimizer)
        body.append("model, optimizer = fabric.setup(model, optimizer)")
    elif setup == "separate":
        body.append("model = fabric.setup_module(model)")
        body.append("optimizer = fabric.setup_optimizers(" + optimizer + ")")
    elif setup == "separate_reversed":
        body.append("optimizer = fabric.setup_optimizers(" + optimizer + ")")
        body.append("model = fabric.setup_module(model)")
    elif setup == "optimizer_first":
        body.append("optimizer = " + optimizer)
        body.append("model = fabric.setup_module(model)")
        body.append("optimizer = fabric.setup_optimizers(optimizer)")
    else:
        body.append("model = fabric.setup_module(model)")
        body.append("optimizer = " + optimizer)
    if launch_at == "after_setup":
        body.append("fabric.launch()")
    loader = "loader = fabric.setup_dataloaders(DataLoader(RandomDataset(16, 4, 3, 0), batch_size=8))"
    if rng.random() < 0.2:  # early, between statements (not inside a block)
        body.insert(rng.choice([i for i in range(len(body) + 1) if i == len(body) or not body[i].startswith(" ")]),
                    loader)
    else:
        body.append(loader)
    for _ in range(rng.randint(0, 3)):
        step = rng.choice(["train", "train", "save", "save_state_dict", "load", "collective", "no_sync", "clip",
                           "gather", "to_device", "load_missing", "seed"])
        if step == "train":
            body += ["for x, y in loader:", "    loss = cross_entropy(model(x), y)", "    optimizer.zero_grad()",
                     "    fabric.backward(loss)", "    optimizer.step()"]
        elif step == "save":
            body.append('fabric.save(path, {"model": model, "optimizer": optimizer, "step": 1})')
        elif step == "save_state_dict":
            body.append('fabric.save(path, {"model": model.state_dict(), "step": 1})')
        elif step == "load":
            body.append('fabric.save(path, {"model": model, "optimizer": optimizer})')
            body.append('fabric.load(path, {"model": model, "optimizer": optimizer})')
        elif step == "collective":
            body.append('fabric.print("sum", fabric.all_reduce(fabric.global_rank + 1, reduce_op="sum").item())')
        elif step == "clip":
            body += ["for x, y in loader:", "    fabric.backward(cross_entropy(model(x), y))",
                     "    fabric.clip_gradients(model, optimizer, %s)" % rng.choice(["max_norm=1.0", "clip_val=0.5"]),
                     "    optimizer.step()"]
        elif step == "gather":
            body.append("fabric.barrier()")
            body.append('fabric.print(fabric.all_gather(fabric.global_rank).shape, fabric.broadcast(%d))' % rng.randint(0, 9))
        elif step == "to_device":
            body.append("fabric.print(fabric.to_device(zeros(2)).shape)")
        elif step == "load_missing":
            body.append('fabric.save(path, {"step": 1})')
            body.append('fabric.load(path, {"step": 0, "model": model}, strict=%s)' % rng.choice(["True", "False"]))
        elif step == "seed":
            body.append("fabric.seed_everything(%d)" % rng.choice([0, 42, 4294967295, 4294967296, -1]))
        else:
            body += ["for x, y in loader:", "    with fabric.no_backward_sync(model):",
                     "        fabric.backward(cross_entropy(model(x), y))", "    optimizer.step()"]
    ckpt = os.path.join(os.path.dirname(path), "ckpt", os.path.basename(path) + ".safetensors")
    out.insert(5, 'path = "%s"' % ckpt)
    out += [indent + line for line in body]
    if launch_at == "function":
        out.append("fabric.launch(train)")
    elif launch_at == "function_args":
        out.append("fabric.launch(train, 0.1, steps=2)")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return (["--emulate-cuda"] if accel == "cuda" else []) + (["--assume=cli", "--devices=2"] if cli else [])


def main():
    argv = sys.argv[1:]
    opts = {"--scripts": None, "--seed": os.environ.get("FABRICSCRIPT_DIFF_SEED", "1"),
            "--seconds": os.environ.get("FABRICSCRIPT_DIFF_SECONDS", "20")}
    while argv:
        if argv[0] not in opts or len(argv) < 2:
            print(__doc__, file=sys.stderr)
            return 2
        opts[argv[0]] = argv[1]
        argv = argv[2:]
    compared = agreeing = 0
    problems = []
    if opts["--scripts"]:
        paths = []
        for root, _, files in os.walk(opts["--scripts"]):
            paths += [os.path.join(root, f) for f in files if f.endswith(".fab")]
        for path in sorted(paths):
            with open(path, encoding="utf-8", errors="replace") as f:
                args, mode = annotations(f.read())
            if mode != "run":
                continue
            ok, bad = compare(path, args)
            compared += 1
            agreeing += ok
            problems += bad
    scripts = compared
    seed, seconds = int(opts["--seed"]), float(opts["--seconds"])
    rng = random.Random(seed)
    generated = 0
    keep = os.environ.get("FABRICSCRIPT_DIFF_KEEP", ".")
    with tempfile.TemporaryDirectory() as tmp:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            path = os.path.join(tmp, "gen-%d.fab" % generated)
            args = generate(rng, path)
            ok, bad = compare(path, args)
            generated += 1
            agreeing += ok
            if bad:
                kept = os.path.join(keep, "diff-%d.fab" % generated)
                with open(path) as src, open(kept, "w") as dst:
                    dst.write(src.read() + "# args: %s\n" % " ".join(args))
                problems += [b.replace(path, kept) for b in bad]
    for p in problems:
        print("DISAGREE " + p)
    print("differential: %d regression scripts and %d generated (seed %d, %.0f s) compared; "
          "%d rule diagnostics agree, %d disagreements" % (scripts, generated, seed, seconds, agreeing, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
