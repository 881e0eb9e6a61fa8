#!/bin/sh
# llama-test.sh -- examples/llama.fab at the reduced size of its "# suite:"
# line, 40 steps under FSDP on two emulated CUDA devices: it runs, learns
# (the loss falls from ln 256 = 5.55 to below 3.5; it reaches about 2.9)
# and prints a sample that starts with its prompt; its auto_wrap_policy
# makes each of the 2 Blocks an FSDP unit beside the root's (3 units).
. "${srcdir:-.}/tests/lib.sh"
[ -r /usr/share/common-licenses/GPL-3 ] || { echo "SKIP: no /usr/share/common-licenses/GPL-3"; exit 77; }
suite=$(sed -n 's/^# suite: //p' "$src/examples/llama.fab")
[ -n "$suite" ] || { echo "FAIL: examples/llama.fab has no '# suite:' line"; exit 1; }
# shellcheck disable=SC2086 # the suite line's words
out=$(cd "$tmp" && FABRICSCRIPT_FSDP_STATS=1 "$fs" "$src/examples/llama.fab" --emulate-cuda -D steps=40 $suite 2>"$tmp/err") || {
  echo "FAIL: examples/llama.fab exited with an error"; cat "$tmp/err"; exit 1; }
echo "$out"
loss=$(echo "$out" | sed -n 's/^final loss \([0-9.]*\)$/\1/p')
[ -n "$loss" ] || { echo "FAIL: no final loss line"; exit 1; }
awk -v l="$loss" 'BEGIN {exit !(l < 3.5)}' || { echo "FAIL: loss $loss after 40 steps"; exit 1; }
echo "$out" | grep -q '^This program is free software' || { echo "FAIL: no sample after the prompt"; exit 1; }
grep -q '^fsdp: rank 0: 3 units' "$tmp/err" || { echo "FAIL: not the policy's units (2 Blocks and the root's)"; cat "$tmp/err"; exit 1; }
