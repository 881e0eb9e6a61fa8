#!/bin/sh
# f64.sh -- precision="64-true" on CUDA (--emulate-cuda) against the CPU,
# on f64.fab's models (MLP with Adam, a class with SGD and clipping,
# a CNN with batch/group/RMS norm and pooling, the GPT with AdamW, a checkpoint saved from and loaded into device
# tensors; a class over where, max, masked attention and every loss with
# RMSprop, Adagrad and Adadelta) and its chain of tensor ops with their gradients: the float64 ops reach their kernels through the device's table
# (runtime/tensor/f64_kernels.h), and emulated cuda's is the cpu's behind
# device pointers, so every loss, gradient norm and parameter sum printed
# must be the CPU's bit for bit:
#   1. one device: cuda = cpu;
#   2. DDP x2, every rank the same batch: cuda = cpu = the one device;
#   3. DDP x2, each rank half the batch (the float64 all-reduce of the
#      gradients decides the training): cuda = cpu, and not the one device.
set -u
. "${srcdir:-.}/tests/lib.sh"
cd "$tmp" || exit 99
run() { # NAME ACCELERATOR ARGS...: NAME.txt (every printed value but the device's)
  name=$1 accel=$2
  shift 2
  "$fs" --emulate-cuda --gpus=2 "$src/tests/dist/f64.fab" -D accelerator="$accel" -D ckpt="$name.ckpt" "$@" \
    > "$name.out" 2> "$name.err" || bad "$name: exit status $?"
  grep -v '^device ' "$name.out" > "$name.txt"
  [ "$(grep -c -E '^(mlp|class|cnn|gpt) [0-9]' "$name.txt")" -eq 32 ] || bad "$name: not 4 x 8 steps"
  [ "$(grep -c -E '^losses [A-Za-z]+ [0-9]' "$name.txt")" -eq 24 ] || bad "$name: not 3 x 8 steps of the losses model"
  grep -q '^gpt param torch.float64' "$name.txt" || bad "$name: no float64 parameters"
  grep -q '^all_reduce torch.float64' "$name.txt" || bad "$name: all_reduce did not keep float64"
  grep -q '^ops torch.float64' "$name.txt" || bad "$name: the ops' result is not float64"
  [ -s "$name.ckpt" ] || bad "$name: no checkpoint"
}
device() { # NAME WANT: the parameters and gradients lay on WANT
  grep -q "^device $2 $2\$" "$1.out" || bad "$1: parameters not on $2 ($(grep '^device' "$1.out"))"
}
same() { cmp -s "$1.txt" "$2.txt" || { bad "$1 and $2 differ:"; diff "$1.txt" "$2.txt" | head -n 6; }; }

run cpu1 cpu
run cuda1 cuda
device cpu1 cpu
device cuda1 cuda:0
same cpu1 cuda1
for a in cpu cuda; do
  run ${a}2 $a -D strategy=ddp -D devices=2
  run ${a}2split $a -D strategy=ddp -D devices=2 -D split=True
done
device cuda2 cuda:0
same cpu2 cuda2
same cpu1 cuda2
same cpu2split cuda2split
cmp -s cpu1.txt cpu2split.txt && bad "split: the same values as the whole batch on one device"
grep -q 'gpt loaded \(.*\) \1$' cuda1.txt || bad "cuda1: the loaded model's loss is not the saved one's"
[ "$(grep -c 'gpt resumed \(.*\) \1$' cuda1.txt)" -eq 2 ] ||
  bad "cuda1: the model and optimizer loaded from the checkpoint do not train as the saved ones"
exit $fail
