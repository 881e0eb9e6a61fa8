#!/bin/sh
# ports-lm-test.sh -- the language-model and LLM-pretraining ports
# (examples/ports/language_model.fab, llm_pretrain.fab) at the reduced size
# of their "# suite:" lines, without torch: the language model trains an
# epoch of 30 batches and its loss falls from ln 256 = 5.55 to below 4.5;
# the pretraining runs 30 iterations under FSDP on two emulated CUDA devices
# on the GPL-3 text written as a uint16 token file, its loss falls below
# 5.3, its TensorBoard event file decodes (tests/tfevents-read.py) with a
# loss and an lr scalar for every iteration, the lr rising through the
# warmup and falling after it, and its final checkpoint is written.
# (Losses against torch: tests/parity/run-lm-parity.test, run-pretrain-parity.test.)
. "${srcdir:-.}/tests/lib.sh"
text=/usr/share/common-licenses/GPL-3
[ -r $text ] || { echo "SKIP: no $text"; exit 77; }
suite() { sed -n 's/^# suite: //p' "$src/examples/ports/$1"; }

# shellcheck disable=SC2046 # the suite line's words
out=$(cd "$tmp" && "$fs" "$src/examples/ports/language_model.fab" --no-progress -D epochs=1 -D log_every=29 \
  $(suite language_model.fab) 2>"$tmp/err") || { cat "$tmp/err"; bad "language_model.fab exited with an error"; }
echo "$out"
loss=$(echo "$out" | sed -n 's/^epoch: 0 - iteration: 29 - loss \([0-9.]*\)$/\1/p')
[ -n "$loss" ] && awk -v l="$loss" 'BEGIN {exit !(l < 4.5)}' || bad "language model: loss '$loss' after 30 batches"
echo "$out" | grep -q '^val loss [0-9.]*$' || bad "language model: no validation loss"

# nanoGPT's train.bin: the text's bytes as uint16 tokens, written with od and printf (no Python needed)
od -An -v -tu1 $text | tr -s ' ' '\n' | grep . | LC_ALL=C awk '{printf "%c%c", $1, 0}' >"$tmp/train.bin"
size=$(wc -c <"$tmp/train.bin")
[ "$size" -eq $(($(wc -c <$text) * 2)) ] || bad "train.bin has $size bytes"
# shellcheck disable=SC2046
out=$(cd "$tmp" && "$fs" "$src/examples/ports/llm_pretrain.fab" --emulate-cuda --no-progress -D data=train.bin \
  -D max_iters=30 -D warmup_iters=10 -D lr_decay_iters=30 -D learning_rate=3e-3 -D log_interval=29 \
  $(suite llm_pretrain.fab) 2>"$tmp/err") || { cat "$tmp/err"; bad "llm_pretrain.fab exited with an error"; }
echo "$out"
loss=$(echo "$out" | sed -n 's/^iter 29: loss \([0-9.]*\),.*/\1/p')
[ -n "$loss" ] && awk -v l="$loss" 'BEGIN {exit !(l < 5.3)}' || bad "pretraining: loss '$loss' after 30 iterations"
[ -s "$tmp/out/pretrain/final.pth" ] || bad "pretraining: no final checkpoint"
ev=$(ls "$tmp"/out/pretrain/tensorboard/version_0/events.out.tfevents.* 2>/dev/null | head -1)
if [ -z "$ev" ]; then
  bad "pretraining: no TensorBoard event file"
elif python3 "$src/tests/tfevents-read.py" "$ev" >"$tmp/events.txt"; then
  [ "$(grep -c ' scalar loss ' "$tmp/events.txt")" -eq 30 ] || bad "pretraining: not 30 loss scalars"
  # the lr: rising to its peak at iteration 10 (the warmup, then the cosine's start), falling after
  awk '$3 == "scalar" && $4 == "lr" { lr[$2] = $5 }
       END { for (i = 1; i < 30; i++) if ((i <= 10) != (lr[i] > lr[i - 1])) exit 1; exit !(length(lr) == 30) }' \
    "$tmp/events.txt" || bad "pretraining: the logged lr is not warmup then decay"
else
  bad "pretraining: the event file does not decode"
fi
exit $fail
