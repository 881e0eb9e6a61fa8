#!/bin/sh
# metrics-test.sh -- torchmetrics-style metrics give the single device's
# values under DDP and FSDP (compute() combines every rank's state):
# tests/dist/metrics.fab on one device, DDP x2 on cpu, FSDP x2 and x4 on
# emulated cuda must print exactly the same lines.
set -u
. "${srcdir:-.}/tests/lib.sh"
cd "$tmp" || exit 99
"$fs" "$src/tests/dist/metrics.fab" >single.out 2>/dev/null || { echo "FAIL: single-device run"; fail=1; }
test -s single.out || { echo "FAIL: the single-device run printed nothing"; fail=1; }
for cfg in "ddp 2 cpu" "fsdp 2 cuda" "fsdp 4 cuda"; do
  set -- $cfg
  "$fs" --emulate-cuda --gpus=4 "$src/tests/dist/metrics.fab" -D strategy=$1 -D devices=$2 -D accelerator=$3 >$1$2.out 2>/dev/null ||
    { echo "FAIL: $cfg run"; fail=1; }
  if cmp -s single.out $1$2.out; then echo "PASS: $1 x$2 gives the single device's values"
  else echo "FAIL: $1 x$2 differs from the single device:"; diff single.out $1$2.out; fail=1; fi
done
exit $fail
