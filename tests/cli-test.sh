#!/bin/sh
# cli-test.sh -- the command line's contract: exit statuses (0 ok, 1 script
# errors, 2 bad invocation, 3 system failure), --help, --version, -D.
. "${srcdir:-.}/tests/lib.sh"
expect() { # status command...
  want=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  [ "$got" -eq "$want" ] || { echo "FAIL: '$*' exited $got, expected $want"; cat "$tmp/err"; fail=1; }
}
printf 'x = param("lr", 0.1)\nprint(f"lr {x}")\n' > "$tmp/ok.fab"
printf 'print(nope)\n' > "$tmp/bad.fab"
printf 'x = (1,\n' > "$tmp/syntax.fab"

expect 0 "$fs" "$tmp/ok.fab"
grep -qx "lr 0.1" "$tmp/out" || { echo "FAIL: the script's output: $(cat "$tmp/out")"; fail=1; }
expect 0 "$fs" -D lr=0.5 "$tmp/ok.fab"
grep -qx "lr 0.5" "$tmp/out" || { echo "FAIL: -D lr=0.5 not applied: $(cat "$tmp/out")"; fail=1; }
expect 0 "$fs" "$tmp/ok.fab" -D lr=0.5        # GNU-style: options after the file
expect 0 "$fs" check "$tmp/ok.fab"
expect 1 "$fs" "$tmp/bad.fab"
expect 1 "$fs" check "$tmp/syntax.fab"
grep -q "syntax.fab:1:5: error\[syntax\]: '(' was never closed" "$tmp/err" || { echo "FAIL: no file:line:col for a syntax error"; fail=1; }
# a .py file is checked, not run: exit status as `check`'s, and the way to run it
printf 'import torch\nprint("ran")\n' > "$tmp/train.py"
expect 0 "$fs" "$tmp/train.py"
[ ! -s "$tmp/out" ] || { echo "FAIL: a .py file ran: $(cat "$tmp/out")"; fail=1; }
grep -q "train.py: Python files are checked, not run; run it with \`fabric run .*train.py\` or \`python .*train.py\`" "$tmp/err" ||
  { echo "FAIL: no word that a .py file is not run: $(cat "$tmp/err")"; fail=1; }
printf 'def f(:\n' > "$tmp/broken.py"
expect 1 "$fs" "$tmp/broken.py"
expect 2 "$fs" -D lr=abc "$tmp/ok.fab"       # a -D value its param() cannot take
expect 2 "$fs" -D lr "$tmp/ok.fab"
expect 2 "$fs" --no-such-option "$tmp/ok.fab"
expect 2 "$fs" --color=sometimes "$tmp/ok.fab"
expect 2 "$fs" --diagnostics-format=xml "$tmp/ok.fab"
expect 2 "$fs" check
expect 3 "$fs" "$tmp/missing.fab"
expect 3 "$fs" check "$tmp"                   # a directory
# issue 18: a -D literal and checkpoint metadata nested 40,000 deep are errors, not crashes
deep=$(awk 'BEGIN { for (i = 0; i < 40000; i++) printf "["; for (i = 0; i < 40000; i++) printf "]" }')
printf 'x = param("x", None)\nprint(x)\n' > "$tmp/deep.fab"
expect 2 "$fs" -D "x=$deep" "$tmp/deep.fab"
grep -q "too many nested parentheses" "$tmp/err" || { echo "FAIL: deep -D literal: $(tail -c 300 "$tmp/err")"; fail=1; }
expect 2 "$fs" check -D "x=$deep" "$tmp/deep.fab"
header="{\"__metadata__\":{\"x\":\"$deep\"}}"
n=${#header}
le64=""
for i in 0 1 2 3 4 5 6 7; do le64="$le64\\$(printf %03o $(( (n >> (8 * i)) & 255 )))"; done
{ printf "$le64"; printf '%s' "$header"; } > "$tmp/deep.safetensors"
printf 'fabric = Fabric(accelerator="cpu", devices=1)\nstate = {"x": 0}\nfabric.load("%s", state)\n' "$tmp/deep.safetensors" > "$tmp/load.fab"
expect 1 "$fs" "$tmp/load.fab"
grep -q "too many nested parentheses" "$tmp/err" || { echo "FAIL: deep checkpoint metadata: $(tail -c 300 "$tmp/err")"; fail=1; }
expect 0 "$fs" --help
grep -q "^Usage: fabricscript" "$tmp/out" || { echo "FAIL: --help"; fail=1; }
expect 0 "$fs" --version
grep -q "^backends: cpu" "$tmp/out" || { echo "FAIL: --version lists no backends"; fail=1; }
expect 1 "$fs" check --diagnostics-format=json "$tmp/bad.fab"
[ -s "$tmp/err" ] && ! grep -qv '^{' "$tmp/err" || { echo "FAIL: json mode wrote a line that is not JSON"; fail=1; }
fails() { echo "FAIL: $*"; fail=1; }
has() { grep -qF -- "$1" "$tmp/err" || fails "$2: no '$1' in: $(cat "$tmp/err")"; }
src=${srcdir:-.}

# The README's signature case, verbatim, on a machine without a GPU
# (CUDA_VISIBLE_DEVICES= hides any): the script block into train.fab, the
# output block compared byte for byte.
awk '/^## The signature case/ {on = 1} on && /^```python$/ {code = 1; next}
     code && /^```$/ {exit} code {print}' "$src/README.md" > "$tmp/train.fab"
awk '/^## The signature case/ {on = 1} on && /^```$/ && !seen {n++; if (n == 2) {out = 1; next}}
     out && /^```$/ {exit} out {print}' "$src/README.md" > "$tmp/readme.out"
[ -s "$tmp/train.fab" ] && [ -s "$tmp/readme.out" ] || fails "README's signature case not found"
fs_abs=$(cd "$(dirname "$fs")" && pwd)/$(basename "$fs")
(cd "$tmp" && CUDA_VISIBLE_DEVICES= "$fs_abs" check train.fab 2>"$tmp/sig.err"; echo $? >"$tmp/sig.rc")
[ "$(cat "$tmp/sig.rc")" = 1 ] || fails "README's signature case exited $(cat "$tmp/sig.rc")"
cmp -s "$tmp/sig.err" "$tmp/readme.out" || { fails "README's signature case differs:"; diff "$tmp/readme.out" "$tmp/sig.err"; }

(cd "$tmp" && CUDA_VISIBLE_DEVICES= "$fs_abs" fix train.fab >"$tmp/sig.fix" 2>&1) || fails "fix of the signature case"
grep -qF '+optimizer = fabric.setup_optimizers(optimizer)' "$tmp/sig.fix" || fails "fix does not apply what check shows: $(cat "$tmp/sig.fix")"

# The caret on the argument a rule is about (issue 13): the set-up model
# again, the parentheses of a call without its required argument, a
# keyword argument; the run points where the check does; JSON and SARIF
# carry the same range.
printf 'fabric = Fabric(accelerator="cpu")\nmodel = Linear(4, 4)\nfm = fabric.setup_module(model)\nfabric.setup_module(fm)\n' > "$tmp/caret.fab"
expect 1 "$fs" check "$tmp/caret.fab"
has "caret.fab:4:21: error[R24]" "R24's caret on the argument"
has "      |                     ^~
" "R24's caret under the argument alone"
expect 1 "$fs" "$tmp/caret.fab"
has "caret.fab:4:21: error[R24]" "the run's R24 on the argument"
expect 1 "$fs" check --diagnostics-format=json "$tmp/caret.fab"
has '"line":4,"column":21,"column_utf16":21,"end":{"line":4,"column":23' "JSON's R24 range"
expect 1 "$fs" check --diagnostics-format=sarif "$tmp/caret.fab"
cat "$tmp/out" "$tmp/err" | grep -A4 '"region"' | tr -d ' \n' | grep -qF '"startLine":4,"startColumn":21,"endLine":4,"endColumn":23' ||
  fails "SARIF's R24 region: $(cat "$tmp/out" "$tmp/err")"
printf 'fabric = Fabric(accelerator="cpu")\nfabric.launch()\nmodel = Linear(4, 4)\nopt = SGD(model.parameters(), lr=0.1)\nfabric.setup_optimizers()\nmodel, opt = fabric.setup(model, opt)\nfabric.clip_gradients(model, opt, clip_val=1.0, max_norm=2.0)\n' > "$tmp/caret2.fab"
expect 1 "$fs" check "$tmp/caret2.fab"
has "caret2.fab:5:24: error[R26]" "R26's caret on the parentheses"
has "caret2.fab:7:49: error[R43]" "R43's caret on max_norm="

# Pre-flight: one note, the declared machine; --here, --gpus, --assume and a run check for the one given
printf 'fabric = Fabric(accelerator="cuda", devices=4)\nfabric.launch()\nf2 = Fabric(accelerator="cuda", devices=8)\n' > "$tmp/gpu.fab"
CUDA_VISIBLE_DEVICES= expect 0 "$fs" check "$tmp/gpu.fab"
has "note: checked for 4 CUDA GPUs as the script declares; this machine has none (--here checks for this machine)" "pre-flight note"
[ "$(grep -c 'note: checked for' "$tmp/err")" = 1 ] || fails "not exactly one pre-flight note: $(cat "$tmp/err")"
CUDA_VISIBLE_DEVICES= expect 1 "$fs" check --here "$tmp/gpu.fab"
has "error[R7]: \`CUDAAccelerator\` can not run on your system" "--here"
CUDA_VISIBLE_DEVICES= expect 1 "$fs" check --gpus=2 "$tmp/gpu.fab"
has "error[R9]: You requested gpu: [0, 1, 2, 3]" "--gpus keeps its meaning"
CUDA_VISIBLE_DEVICES= expect 1 "$fs" check --assume=deepspeed "$tmp/gpu.fab"
has "error[R7]" "--assume gives the machine"
CUDA_VISIBLE_DEVICES= expect 1 "$fs" "$tmp/gpu.fab"
has "error[R7]" "a run checks for the machine it runs on"
CUDA_VISIBLE_DEVICES= expect 0 "$fs" check "$src/tests/scripts/diag/preflight_cpu_silent.fab"
[ ! -s "$tmp/err" ] || fails "a script that declares nothing missing printed: $(cat "$tmp/err")"
printf 'fabric = Fabric(strategy="fsdp", accelerator="cuda", devices=2)\nfabric.launch()\nmodel = fabric.setup_module(Linear(64, 64))\noptimizer = fabric.setup_optimizers(Adam(model.parameters()))\n' > "$tmp/plan.fab"
CUDA_VISIBLE_DEVICES= expect 0 "$fs" plan "$tmp/plan.fab"
has "note: checked for 2 CUDA GPUs" "plan pre-flight"
grep -q "rank" "$tmp/out" || fails "plan printed no plan for the declared machine: $(cat "$tmp/out")"
# plan's options (issue 16): the fit against a size or a GPU's name, the
# batch for the activations, JSON; they belong to plan alone.  40 KiB: the
# 4160 parameters need 16 * ceil(4160 / W) + 8 * W * ceil(4160 / W) bytes
# under FSDP over W ranks (the one unit gathered), <= 40960 from W = 10 on
CUDA_VISIBLE_DEVICES= expect 0 "$fs" plan --gpu-memory=H100 --batch-size=8 "$tmp/plan.fab"
grep -q "^fits in H100 (80.0 GiB): " "$tmp/out" || fails "plan --gpu-memory=H100: $(cat "$tmp/out")"
grep -q "^input: \[8, 64\] per rank, from --batch-size" "$tmp/out" || fails "plan --batch-size=8: $(cat "$tmp/out")"
CUDA_VISIBLE_DEVICES= expect 0 "$fs" plan --gpu-memory=40KiB "$tmp/plan.fab"
grep -q "^does not fit in 40.0 KiB: " "$tmp/out" || fails "plan --gpu-memory=40KiB: $(cat "$tmp/out")"
grep -q "^smallest change that fits: FSDP on 5 nodes x 2 devices (10 ranks) (39.0 KiB per rank)" "$tmp/out" || fails "plan: no change proposed: $(cat "$tmp/out")"
CUDA_VISIBLE_DEVICES= expect 0 "$fs" plan --format=json --gpu-memory=80GB "$tmp/plan.fab"
python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))["plan"]; assert p["gpu"]["fits"] and p["gpu"]["bytes"] == 80 * 10**9 and p["layouts"][0]["last_rank"] == 1, p' "$tmp/out" ||
  fails "plan --format=json: $(cat "$tmp/out")"
expect 2 "$fs" plan --gpu-memory=80XB "$tmp/plan.fab"
has "--gpu-memory must be a size" "a bad --gpu-memory"
expect 2 "$fs" plan --gpu-memory=H1000 "$tmp/plan.fab"
expect 2 "$fs" plan --batch-size=0 "$tmp/plan.fab"
expect 2 "$fs" plan --context=x "$tmp/plan.fab"
expect 2 "$fs" plan --format=yaml "$tmp/plan.fab"
expect 2 "$fs" --batch-size=8 "$tmp/ok.fab"
has "options of plan" "--batch-size outside plan"
expect 2 "$fs" check --gpu-memory=H100 "$tmp/ok.fab"

# Diagnostics: error[ID], suggestions, fix-its, the closing line, explain
printf 'fabric = Fabric(strategy="fdsp", accelerator="cpu")\nfabric.lanch()\n' > "$tmp/typo.fab"
expect 1 "$fs" check "$tmp/typo.fab"
has 'typo.fab:1:26: error[R1]: You selected an invalid strategy name' "caret on the argument"
has 'help: did you mean `strategy="fsdp"`?' "strategy suggestion"
has '+   1 | fabric = Fabric(strategy="fsdp", accelerator="cpu")' "fix-it under the message"
has 'help: did you mean `launch`?' "attribute suggestion"
has '2 errors; fabricscript fix can apply 2 fixes' "closing line"
expect 0 "$fs" fix "$tmp/typo.fab"
grep -qF '+fabric.launch()' "$tmp/out" || fails "fix does not apply the suggestion: $(cat "$tmp/out")"
expect 1 "$fs" check "$src/tests/scripts/diag/did_you_mean_none.fab"
! grep -q "^help: did you mean" "$tmp/err" || fails "a suggestion for a name nothing is near: $(cat "$tmp/err")"
expect 2 "$fs" chek "$tmp/typo.fab"
has "help: did you mean 'check'?" "subcommand suggestion"
expect 2 "$fs" check --devcies=2 "$tmp/typo.fab"
has "help: did you mean '--devices'?" "option suggestion"
expect 0 "$fs" explain R36
grep -q '^R36: ' "$tmp/out" && grep -q '^Before (tests/scripts/rules/' "$tmp/out" &&
  grep -q '^After (tests/scripts/rules/' "$tmp/out" || fails "explain R36: $(cat "$tmp/out")"
expect 0 "$fs" explain w9
expect 2 "$fs" explain R99
has "did you mean 'R9'?" "explain suggestion"
# every rule of docs/rules.md's trigger table is explained, with its scripts
for id in $(sed -n 's/^| \([RW][0-9]*\) | `.*$/\1/p' "$src/docs/rules.md"); do
  "$fs" explain "$id" >"$tmp/out" 2>&1 && grep -q '^Before' "$tmp/out" || fails "explain $id: $(cat "$tmp/out")"
done

# every rule id the sources report has an explanation
for id in output $(grep -ohE 'fsF_(fail|warn)\(iss, "[A-Za-z0-9-]+"|(fsC_report|fsD_add)\([^,]+, FS_SEV_[A-Z]+, "[a-z0-9-]+"' \
                    "$src"/interp/*/*.c | sed -E 's/.*"([^"]*)"$/\1/' | sort -u); do
  "$fs" explain "$id" >/dev/null 2>"$tmp/err" || fails "explain $id: $(cat "$tmp/err")"
done

# JSON lines and SARIF validate against their schemas (tests/json-schema.py:
# the jsonschema package where installed, else its own subset; both when it is)
if command -v python3 >/dev/null; then
  for mode in "" 1; do
    export FS_SCHEMA_BUILTIN=$mode
    "$fs" check --diagnostics-format=json "$tmp/typo.fab" "$tmp/train.fab" "$tmp/missing.fab" 2>"$tmp/d.jsonl"
    CUDA_VISIBLE_DEVICES= "$fs" check --diagnostics-format=json "$src/tests/scripts/diag/"*.fab 2>>"$tmp/d.jsonl"
    python3 "$src/tests/json-schema.py" "$src/docs/diagnostics.schema.json" --lines "$tmp/d.jsonl" || fails "JSON lines do not validate"
    sed 's/"version":1,//' "$tmp/d.jsonl" > "$tmp/bad.jsonl"
    python3 "$src/tests/json-schema.py" "$src/docs/diagnostics.schema.json" --lines "$tmp/bad.jsonl" >/dev/null && fails "the validator accepts lines without a version"
    "$fs" check --diagnostics-format=sarif "$tmp/typo.fab" "$tmp/train.fab" "$tmp/missing.fab" 2>"$tmp/d.sarif"
    python3 "$src/tests/json-schema.py" "$src/docs/sarif-2.1.0-subset.schema.json" "$tmp/d.sarif" || fails "SARIF does not validate"
    sed 's/"ruleId"/"ruleID"/' "$tmp/d.sarif" > "$tmp/bad.sarif"
    python3 "$src/tests/json-schema.py" "$src/docs/sarif-2.1.0-subset.schema.json" "$tmp/bad.sarif" >/dev/null && fails "the validator accepts a misspelt SARIF property"
  done
  unset FS_SCHEMA_BUILTIN
  grep -q '"columnKind": "utf16CodeUnits"' "$tmp/d.sarif" || fails "SARIF without columnKind"
  grep -q '"replacements"' "$tmp/d.sarif" || fails "SARIF without fixes"
else
  echo "cli-test: python3 not found, the schema checks are skipped"
fi

# A multi-rank run: stderr stays one JSON object per line, a rank's
# diagnostics carry "rank", the launcher's own message is JSON too
printf 'fabric = Fabric(accelerator="cpu", devices=2)\nfabric.launch()\nprint("rank", fabric.global_rank)\nassert fabric.global_rank == 0, "rank 1 stops here"\n' > "$tmp/ranks.fab"
expect 1 "$fs" --diagnostics-format=json "$tmp/ranks.fab"
! grep -qv '^{' "$tmp/err" || fails "a multi-rank run wrote a line that is not JSON: $(cat "$tmp/err")"
has '"message":"AssertionError: rank 1 stops here","notes":[],"help":null,"fix":[],"rank":1}' "a rank's diagnostic"
has '"rule":"launch","message":"rank 1 (pid' "the launcher's message"
if command -v python3 >/dev/null; then
  python3 "$src/tests/json-schema.py" "$src/docs/diagnostics.schema.json" --lines "$tmp/err" || fails "a multi-rank run's stderr does not validate"
fi

# A warning of Fabric(...) is shown once, not by the check and again by the run
printf 'fabric = Fabric(accelerator="cpu", devices=1, precision="16-mixed")\nprint("hi")\n' > "$tmp/warn.fab"
"$fs" "$tmp/warn.fab" >"$tmp/out" 2>"$tmp/err"
[ "$(grep -c 'warning\[W8\]' "$tmp/err")" -eq 1 ] || { echo "FAIL: the precision warning is not shown once: $(cat "$tmp/err")"; fail=1; }
# A loader with zero batches runs zero steps and draws no progress line
printf 'loader = DataLoader(RandomDataset(3, 4, 3, 0), batch_size=8, drop_last=True)\nn = 0\nfor epoch in range(2):\n    for x, y in loader:\n        n += 1\nprint(n)\n' > "$tmp/empty.fab"
FABRICSCRIPT_PROGRESS_INTERVAL=0 "$fs" "$tmp/empty.fab" >"$tmp/out" 2>"$tmp/err"
grep -qx 0 "$tmp/out" && ! [ -s "$tmp/err" ] || { echo "FAIL: a loader of zero batches: $(cat "$tmp/out" "$tmp/err")"; fail=1; }
# fix on a .py file: the seed's mistake inside main(fabric) of the LLM script,
# fixed in place, then checks clean (issue 19, point 6)
sed 's/  # error:.*$//' "$src/tests/scripts/python/mistakes/llm_pretrain_fsdp_seed.py" >"$tmp/pretrain.py"
expect 1 "$fs" check "$tmp/pretrain.py"
expect 0 "$fs" fix "$tmp/pretrain.py" --write
grep -qF '    model = fabric.setup_module(model)' "$tmp/pretrain.py" || fails "fix --write on a .py file: $(cat "$tmp/err")"
expect 0 "$fs" check "$tmp/pretrain.py"

# test --format: TAP 13 and JUnit XML that their readers accept (issue 17, point 5)
printf 'x = 1  # error: never reported\n' > "$tmp/miss.fab"
expect 1 "$fs" test --format=tap "$tmp/ok.fab" "$tmp/miss.fab"
head -1 "$tmp/out" | grep -qx 'TAP version 13' && grep -q "^ok 1 - $tmp/ok.fab\$" "$tmp/out" &&
  grep -q "^not ok 2 - $tmp/miss.fab\$" "$tmp/out" && tail -1 "$tmp/out" | grep -qx '1..2' ||
  fails "test --format=tap: $(cat "$tmp/out")"
expect 1 "$fs" test --format=junit "$tmp/ok.fab" "$tmp/miss.fab"
python3 -c 'import sys, xml.etree.ElementTree as E
s = E.parse(sys.argv[1]).getroot().find("testsuite")
cases = s.findall("testcase")
assert s.get("tests") == "2" and s.get("failures") == "1", s.attrib
assert cases[0].find("failure") is None and cases[1].find("failure") is not None
assert "missing error at line 1" in cases[1].find("failure").text' "$tmp/out" || fails "test --format=junit: $(cat "$tmp/out")"
expect 2 "$fs" test --format=xml "$tmp/ok.fab"
expect 2 "$fs" plan --format=tap "$tmp/ok.fab"

# Runs end cleanly (issue 18, point 7): Ctrl-C is KeyboardInterrupt at the
# script's place with its output flushed, exit 130; an allocation that
# cannot be made is MemoryError, exit 3; a range longer than INT64_MAX
# indexes and iterates as Python's, and its len() is Python's OverflowError.
printf 'print("before the loop")\nx = 0\nwhile True:\n    x += 1\n' > "$tmp/forever.fab"
python3 - "$fs" "$tmp/forever.fab" >"$tmp/sigint" 2>&1 <<'PY' || fails "Ctrl-C: $(cat "$tmp/sigint")"
import signal, subprocess, sys, time
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
time.sleep(1.0)
p.send_signal(signal.SIGINT)
out, err = p.communicate(timeout=60)
assert p.returncode == 130, (p.returncode, err)
assert out == "before the loop\n", out
assert "forever.fab:3:1: error[runtime]: KeyboardInterrupt" in err, err
PY
printf 'x = [0] * (2**40)\n' > "$tmp/huge.fab"
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1" expect 3 "$fs" "$tmp/huge.fab"
has "huge.fab:1:5: error[runtime]: MemoryError" "MemoryError"
printf 'M = 9223372036854775807\nr = range(-M, M)\nprint(r[0], r[-1], M - 1 in r, M in r)\nfor i in r:\n    print(i)\n    break\n' > "$tmp/bigrange.fab"
expect 0 "$fs" "$tmp/bigrange.fab"
[ "$(cat "$tmp/out")" = "-9223372036854775807 9223372036854775806 True False
-9223372036854775807" ] || fails "a range past INT64_MAX: $(cat "$tmp/out")"
printf 'M = 9223372036854775807\nprint(len(range(-M, M)))\n' > "$tmp/biglen.fab"
expect 1 "$fs" "$tmp/biglen.fab"
has "OverflowError: Python int too large to convert to C ssize_t" "len() of a range past INT64_MAX"

[ $fail -eq 0 ] && echo "cli-test: all passed"
exit $fail
