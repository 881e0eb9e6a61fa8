#!/bin/sh
# cnn-test.sh -- examples/cnn.fab at reduced size (20 training batches,
# 2000 test images): it runs, checkpoints, and learns (test accuracy above
# 50%; chance is 10%, a full epoch reaches about 88%).  SKIP (77) without the
# Fashion-MNIST files.
. "${srcdir:-.}/tests/lib.sh"
[ -f /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz ] || { echo "SKIP: no Fashion-MNIST"; exit 77; }
out=$(cd "$tmp" && "$fs" "$src/examples/cnn.fab" -D epochs=1 -D train_batches=20 -D test_batches=2 2>/dev/null) || {
  echo "FAIL: examples/cnn.fab exited with an error"; exit 1; }
echo "$out"
acc=$(echo "$out" | sed -n 's/^epoch 1: .*test accuracy: \([0-9.]*\)%$/\1/p')
[ -n "$acc" ] || { echo "FAIL: no accuracy line"; exit 1; }
[ -s "$tmp/cnn.safetensors" ] || { echo "FAIL: no checkpoint"; exit 1; }
awk -v a="$acc" 'BEGIN {exit !(a > 50)}' || { echo "FAIL: accuracy $acc% after 20 batches"; exit 1; }
