#!/bin/sh
# amp16.sh -- precision="16-mixed" on CUDA (--emulate-cuda) under DDP and
# FSDP against one device (docs/runtime.md, "16-mixed on CUDA"), on
# amp16.fab's MLP with Adam, clipping every other step:
#   1. every rank on the same batch: FSDP x1/x2, DDP x2 and DDP x4 print the
#      one device's losses byte for byte, so they skip its steps (a skipped
#      step repeats its loss); under FSDP x2 one of those steps overflowed in
#      rank 1's shards only, which rank 0 learns from the ShardedGradScaler's
#      all-reduce of found_inf (without it rank 0 steps and the losses part);
#      FSDP x4 skips one step more: it reduces in float16 (MixedPrecision's
#      reduce_dtype) with torch's predivide factor 2 for 4 ranks, so the sum
#      of four halves, twice a gradient, overflows where the gradient did not;
#   2. each rank its share of the batch: FSDP x2 skips the steps DDP x2 and
#      one device skip, its losses within 5e-3 relative of both (float16
#      gradients of half batches, reduced in float16 by FSDP, measured 1.8e-3);
#   3. checkpoints: FSDP x2 saves after 12 steps without the scaler's state
#      (Fabric's save never stores it), and one device and FSDP x2 resumed
#      from it print the same losses, the scale back at 65536 (skips again).
set -u
. "${srcdir:-.}/tests/lib.sh"
cd "$tmp" || exit 99
run() { # NAME ARGS...: NAME.out (every line), NAME.txt (the losses)
  name=$1
  shift
  "$fs" --emulate-cuda --gpus=4 "$src/tests/dist/amp16.fab" "$@" > "$name.out" 2> "$name.err" || bad "$name: exit status $?"
  grep '^loss ' "$name.out" > "$name.txt"
}
skipped() { awk '$3 == prev { printf "%s ", $2 - 1 } { prev = $3 }' "$1"; }
close() { # A B TOL: every loss of B within TOL relative of A's
  paste "$1" "$2" | awk -v tol="$3" -v a="$1" -v b="$2" '
    { n++; d = $3 - $6; if (d < 0) d = -d; m = $3 < 0 ? -$3 : $3
      if ($2 != $5 || d > tol * m) { if (bad++ < 5) print a " vs " b ": step " $2 ": " $3 " vs " $6 } }
    END { if (n < 30) { print a ": only " n " steps"; bad = 1 }; exit bad > 0 }'
}

# 1. the same batch on every rank
run single
[ "$(wc -l < single.txt)" -eq 30 ] || bad "single: not 30 steps"
skips=$(skipped single.txt)
[ -n "$skips" ] || bad "single: no step was skipped (the test needs overflows)"
[ "$(echo $skips | wc -w)" -lt 20 ] || bad "single: too many skipped steps ($skips)"
for cfg in "fsdp 1" "fsdp 2" "ddp 2" "ddp 4"; do
  set -- $cfg
  run $1$2 -D strategy=$1 -D devices=$2
  cmp -s single.txt $1$2.txt || bad "$cfg: losses differ from the single device's (skipped: $skips vs $(skipped $1$2.txt))"
done
run fsdp4 -D strategy=fsdp -D devices=4
four=$(skipped fsdp4.txt)
[ "$(echo $four | wc -w)" -eq $(($(echo $skips | wc -w) + 1)) ] && case "$four" in "$skips"*) true ;; *) false ;; esac ||
  bad "fsdp 4: skipped $four, not one step more than the single device's $skips (float16 reduce)"
# a step whose overflow only rank 1's shards saw
only1=$(sed 's/^\[rank [0-9]*\] //' fsdp2.out |
        awk '$1 == "finite" { f[$3] = f[$3] " " $2 "=" $4 } END { for (s in f) if (f[s] ~ /0=True/ && f[s] ~ /1=False/) print s }' |
        sort -n | head -n 1)
[ -n "$only1" ] || bad "fsdp 2: no step overflowed in rank 1's shards alone"
case " $skips" in *" $only1 "*) ;; *) bad "fsdp 2: step $only1 (rank 1's overflow) was not skipped" ;; esac

# 2. each rank its share of the batch
run fsdp2split -D strategy=fsdp -D devices=2 -D split=True
run ddp2split -D strategy=ddp -D devices=2 -D split=True
[ "$(skipped fsdp2split.txt)" = "$skips" ] || bad "fsdp 2 split: skipped $(skipped fsdp2split.txt), one device $skips"
[ "$(skipped ddp2split.txt)" = "$skips" ] || bad "ddp 2 split: skipped $(skipped ddp2split.txt), one device $skips"
close ddp2split.txt fsdp2split.txt 5e-3 || bad "fsdp 2 split: losses differ from DDP x2's"
close single.txt fsdp2split.txt 5e-3 || bad "fsdp 2 split: losses differ from the single device's"

# 3. checkpoints: no scaler state; resumed alike on one device and FSDP x2
run save2 -D strategy=fsdp -D devices=2 -D steps=12 -D save=ck.st
[ -s ck.st ] || bad "fsdp 2: no checkpoint"
grep -a -q -i scale ck.st && bad "fsdp 2: the checkpoint holds a scaler's state"
run resumed1 -D resume=ck.st
run resumed2 -D strategy=fsdp -D devices=2 -D resume=ck.st
cmp -s resumed1.txt resumed2.txt || bad "resuming FSDP x2's checkpoint: one device and FSDP x2 differ"
[ -n "$(skipped resumed1.txt)" ] || bad "resumed: no step skipped (the scale should start at 65536 again)"
cmp -s resumed1.txt single.txt && bad "resumed: the same losses as a fresh start"
exit $fail
