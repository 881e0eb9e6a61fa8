#!/bin/sh
# equivalence.sh -- single-device, DDP and FSDP runs of one script agree
# (docs/distributed.md, "Equivalence"), with --emulate-cuda (one process per
# rank on the cpu backend):
#   - initial parameters: the saved file is the same bytes for single, DDP x2,
#     FSDP x2/x3/x4, on meta or not;
#   - 50 Adam steps of an MLP on one global batch: every loss within 1e-5
#     relative of the single-device run, also with clip_gradients(max_norm);
#   - a checkpoint FSDP x2 saves loads on one device, and FSDP x2 resumes
#     from it as the single device does; in both formats (.st, .ckpt);
#   - a rank killed mid-run stops the run with status 3, naming the rank;
#   - `plan` gives the formula's bytes for FSDP x2, DDP x2 and one device,
#     activations included, one line for both ranks;
#   - the same for a script's own Module class (initial bytes, losses,
#     checkpoints; section 6);
#   - FSDPStrategy(auto_wrap_policy={Block}) on a class: the one-device
#     losses, and plan's gathered unit is the runtime's own peak (section 7).
set -u
. "${srcdir:-.}/tests/lib.sh"
cd "$tmp" || exit 99
run() { "$fs" --emulate-cuda --gpus=4 "$@"; }

# 1. initial parameters
run "$src/tests/dist/init.fab" -D strategy=auto -D meta=False -D out=single.st || bad "single init"
for cfg in "ddp 2 False" "fsdp 2 True" "fsdp 4 True" "fsdp 3 False" "fsdp 1 True"; do
  set -- $cfg
  run "$src/tests/dist/init.fab" -D strategy=$1 -D devices=$2 -D meta=$3 -D out=$1$2$3.st || bad "$cfg init"
  cmp -s single.st $1$2$3.st || bad "$cfg: initial parameters differ from the single device's"
done

# 2. losses of 50 steps; 3. checkpoints
close() { # file file: every loss within 1e-5 relative
  paste "$1" "$2" | awk -v a="$1" -v b="$2" '
    { n++; d = $2 - $4; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2
      if ($1 != $3 || d > 1e-5 * m) { print a " vs " b ": step " $1 ": " $2 " vs " $4; bad = 1 } }
    END { if (n < 10) { print a ": only " n " steps"; bad = 1 } ; exit bad }'
}
run "$src/tests/dist/train.fab" -D strategy=auto > single.txt || bad "single train"
for cfg in "ddp 2" "fsdp 2" "fsdp 4" "fsdp 1"; do
  set -- $cfg
  run "$src/tests/dist/train.fab" -D strategy=$1 -D devices=$2 > $1$2.txt || bad "$cfg train"
  close single.txt $1$2.txt || bad "$cfg: losses differ from the single device's"
done
[ "$(wc -l < single.txt)" -eq 50 ] || bad "single: not 50 steps"
# gradient clipping: the norm over every rank's shards
run "$src/tests/dist/train.fab" -D strategy=auto -D clip=0.05 > clip1.txt || bad "single clip"
run "$src/tests/dist/train.fab" -D strategy=fsdp -D devices=2 -D clip=0.05 > clip2.txt || bad "fsdp 2 clip"
close clip1.txt clip2.txt || bad "clip_gradients under FSDP x2: losses differ"
cmp -s clip1.txt single.txt && bad "clip=0.05 does not clip"
run "$src/tests/dist/train.fab" -D strategy=fsdp -D devices=2 -D meta=True -D epochs=2 -D save=ck.st > /dev/null ||
  bad "fsdp 2 save"
run "$src/tests/dist/train.fab" -D strategy=auto -D epochs=2 -D resume=ck.st > resumed1.txt || bad "single resume"
run "$src/tests/dist/train.fab" -D strategy=fsdp -D devices=2 -D meta=True -D epochs=2 -D resume=ck.st > resumed2.txt ||
  bad "fsdp 2 resume"
close resumed1.txt resumed2.txt || bad "resuming FSDP x2's checkpoint: losses differ"
# the same in PyTorch's format (.pt, .ckpt): FSDP's slices written into one torch.save file
mkdir single fsdp2 # one name: the archive inside is named after the file
run "$src/tests/dist/init.fab" -D strategy=auto -D meta=False -D out=single/init.pt || bad "single init .pt"
run "$src/tests/dist/init.fab" -D strategy=fsdp -D devices=2 -D meta=True -D out=fsdp2/init.pt || bad "fsdp 2 init .pt"
cmp -s single/init.pt fsdp2/init.pt || bad "fsdp 2: its .pt differs from the single device's"
run "$src/tests/dist/train.fab" -D strategy=fsdp -D devices=2 -D meta=True -D epochs=2 -D save=ck.ckpt > /dev/null ||
  bad "fsdp 2 save .ckpt"
run "$src/tests/dist/train.fab" -D strategy=auto -D epochs=2 -D resume=ck.ckpt > resumed1t.txt || bad "single resume .ckpt"
cmp -s resumed1.txt resumed1t.txt || bad "resuming from the .ckpt differs from resuming from the .safetensors"
run "$src/tests/dist/train.fab" -D strategy=fsdp -D devices=2 -D meta=True -D epochs=2 -D resume=ck.ckpt > resumed2t.txt ||
  bad "fsdp 2 resume .ckpt"
close resumed1t.txt resumed2t.txt || bad "resuming FSDP x2's .ckpt: losses differ"

# 4. a killed rank
"$fs" --emulate-cuda "$src/tests/dist/train.fab" -D strategy=fsdp -D devices=2 -D epochs=1000000 > long.txt 2> long.err &
sup=$!
i=0
while [ ! -s long.txt ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
victim=$(pgrep -P $sup | tail -n 1) # the ranks are the supervisor's children
[ -n "$victim" ] && kill -KILL $victim
wait $sup
st=$?
[ $st -eq 3 ] || bad "killed rank: status $st, not 3"
grep -q "rank [0-9] (pid $victim) was killed by signal 9" long.err || { bad "killed rank: not named"; cat long.err; }

# 5. plan: the MLP's 1637 parameters (units of 416, 1056 and 165) under FSDP x2
# shard to 208 + 528 + 83 = 819 per rank: 3276 B of parameters and as much
# gradient, 6552 B of Adam states, the largest unit gathered with its
# gradient 8 * 1056 = 8448 B; one device: 6548, 6548, 13096.  Activations
# for a per-rank batch of B rows (32 // world_size): the batch 48 B, fc1,
# ReLU, fc2 and Tanh 128 B each, fc3 20 B per row, and the gradients alive
# at once during backward, per size (the allocator reuses blocks by exact
# size): two 32-wide (a layer's input and output), two 5-wide (the loss's
# and fc3's output), 296 B per row: 876 * B = 14016 B for B = 16, 28032 B
# for B = 32.  One line for ranks 0-1, then the sum over ranks.
plan_row() { "$fs" plan --emulate-cuda --gpus=4 "$src/tests/dist/train.fab" "$@" | awk '$1 == "'"${R:-0}"'" { $1 = ""; print substr($0, 2) }'; }
[ "$(R=0-1 plan_row -D strategy=fsdp -D devices=2)" = "3.2 KiB 3.2 KiB 6.4 KiB 8.2 KiB 13.7 KiB 34.7 KiB" ] ||
  bad "plan fsdp 2: $(R=0-1 plan_row -D strategy=fsdp -D devices=2)"
[ "$(R=all plan_row -D strategy=fsdp -D devices=2)" = "6.4 KiB 6.4 KiB 12.8 KiB 16.5 KiB 27.4 KiB 69.5 KiB" ] ||
  bad "plan fsdp 2, all ranks"
[ "$(plan_row -D strategy=auto)" = "6.4 KiB 6.4 KiB 12.8 KiB 0 B 27.4 KiB 53.0 KiB" ] || bad "plan single: $(plan_row -D strategy=auto)"
[ "$(R=0-1 plan_row -D strategy=ddp -D devices=2)" = "6.4 KiB 6.4 KiB 12.8 KiB 0 B 13.7 KiB 39.3 KiB" ] || bad "plan ddp 2"
# exact bytes in JSON
json=$("$fs" plan --format=json --emulate-cuda --gpus=4 "$src/tests/dist/train.fab" -D strategy=fsdp -D devices=2)
case $json in
  *'"layouts": [{"first_rank": 0, "last_rank": 1, "parameters": 3276, "gradients": 3276, "optimizer": 6552, "gathered_unit": 8448, "activations": 14016,'*) ;;
  *) bad "plan --format=json: $json" ;;
esac
# a plan is for the target machine --gpus describes: no GPU (or emulation) needed here
gpu_plan=$("$fs" plan --gpus=4 "$src/tests/dist/train.fab" -D strategy=fsdp -D devices=2 | awk '$1 == "0-1" { $1 = ""; print substr($0, 2) }')
[ "$gpu_plan" = "3.2 KiB 3.2 KiB 6.4 KiB 8.2 KiB 13.7 KiB 34.7 KiB" ] || bad "plan --gpus=4 without --emulate-cuda: $gpu_plan"
plan_row -D strategy=fsdp -D devices=2 -D save=planned.st > /dev/null
[ ! -e planned.st ] || bad "plan ran the training (it wrote the checkpoint)"

# 6. a script's own Module class (class_init.fab, class_train.fab): the same
# initial bytes (parameters and buffers, BatchNorm's too) on every strategy,
# world size and meta or not; the same losses on one device, DDP x2 and FSDP
# x2/x4 built on meta; FSDP x2's checkpoint resumed on one device and on
# FSDP x2 alike
run "$src/tests/dist/class_init.fab" -D strategy=auto -D meta=False -D out=csingle.st > /dev/null || bad "class: single init"
for cfg in "ddp 2 False" "fsdp 2 True" "fsdp 4 True" "fsdp 3 False" "fsdp 1 True"; do
  set -- $cfg
  run "$src/tests/dist/class_init.fab" -D strategy=$1 -D devices=$2 -D meta=$3 -D out=c$1$2$3.st > /dev/null || bad "class: $cfg init"
  cmp -s csingle.st c$1$2$3.st || bad "class: $cfg: initial parameters differ from the single device's"
done
run "$src/tests/dist/class_train.fab" -D strategy=auto > csingle.txt || bad "class: single train"
for cfg in "ddp 2 False" "fsdp 2 True" "fsdp 4 True" "fsdp 2 False"; do
  set -- $cfg
  run "$src/tests/dist/class_train.fab" -D strategy=$1 -D devices=$2 -D meta=$3 > c$1$2$3.txt || bad "class: $cfg train"
  close csingle.txt c$1$2$3.txt || bad "class: $cfg: losses differ from the single device's"
done
run "$src/tests/dist/class_train.fab" -D strategy=fsdp -D devices=2 -D meta=True -D epochs=2 -D save=cck.ckpt > /dev/null ||
  bad "class: fsdp 2 save"
run "$src/tests/dist/class_train.fab" -D strategy=auto -D epochs=2 -D resume=cck.ckpt > cresumed1.txt || bad "class: single resume"
run "$src/tests/dist/class_train.fab" -D strategy=fsdp -D devices=2 -D meta=True -D epochs=2 -D resume=cck.ckpt > cresumed2.txt ||
  bad "class: fsdp 2 resume"
close cresumed1.txt cresumed2.txt || bad "class: resuming FSDP x2's checkpoint: losses differ"

# 7. auto_wrap_policy on a script class (class_policy.fab: 3 Blocks of 4256
# parameters inside a Stack, embedding + norm + head 4160): the policy's
# units give the one-device losses on FSDP x2/x4 built on meta, also with
# the head tied to a unit's embedding; `plan`'s gathered unit (the root's
# unit, held for the whole step, plus the largest Block, parameters and
# gradients) is the bytes the run itself gathered at most on every rank:
# 8 * (4160 + 4256) = 67328 with {Block} (as a set, a list, ModuleWrapPolicy
# or transformer_auto_wrap_policy through functools.partial), 8 * 12768 =
# 102144 (the Stack) without, 8 * (256 + 2112) = 18944 size-based (units of
# the embedding, the head and each Linear of the Blocks; the norms the root's)
run "$src/tests/dist/class_policy.fab" -D strategy=auto > psingle.txt || bad "policy: single train"
run "$src/tests/dist/class_policy.fab" -D strategy=auto -D policy=tied > ptsingle.txt || bad "policy: tied single train"
for cfg in "set 2" "set 4" "list 2" "none 2" "tied 2" "tied 4" "mwp 2" "partial 2" "size 2" "size 4"; do
  set -- $cfg
  ref=psingle.txt
  [ $1 = tied ] && ref=ptsingle.txt
  FABRICSCRIPT_FSDP_STATS=1 run "$src/tests/dist/class_policy.fab" -D policy=$1 -D devices=$2 -D meta=True > p$1$2.txt 2> p$1$2.err ||
    { bad "policy: $cfg train"; cat p$1$2.err; }
  close $ref p$1$2.txt || bad "policy $cfg: losses differ from the single device's"
  [ $2 = 2 ] || continue
  planned=$("$fs" plan --format=json --emulate-cuda --gpus=4 "$src/tests/dist/class_policy.fab" -D policy=$1 -D devices=2 |
    grep -o '"gathered_unit": [0-9]*' | head -n 1 | sed 's/.* //') # ranks 0-1's layout
  for r in 0 1; do
    peak=$(sed -n "s/.*fsdp: rank $r: [0-9]* units, at most \([0-9]*\) bytes gathered/\1/p" p$1$2.err)
    [ -n "$peak" ] && [ "$peak" = "$planned" ] || bad "policy $cfg: rank $r gathered ${peak:-?} B, plan says ${planned:-?} B"
  done
  case $1 in set | list | mwp | partial) want=67328 ;; none) want=102144 ;; size) want=18944 ;; *) want=$planned ;; esac
  [ "$planned" = "$want" ] || bad "policy $cfg: plan's gathered unit $planned B, not $want"
done
err=$("$fs" --emulate-cuda --gpus=4 - 2>&1 <<'EOS'
fabric = Fabric(strategy=FSDPStrategy(auto_wrap_policy=3), accelerator="cuda", devices=2)
EOS
) && bad "auto_wrap_policy=3 ran"
case $err in *"auto_wrap_policy=...): a set of module classes ({Block}) or a callable policy, not int"*) ;; *) bad "auto_wrap_policy=3: $err" ;; esac

[ $fail -eq 0 ] && echo "equivalence: all passed"
exit $fail
