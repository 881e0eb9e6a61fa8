#!/bin/sh
# loggers-test.sh -- Fabric's CSVLogger and TensorBoardLogger write
# Lightning's layout (root/name/version), rank 0 alone under DDP: the CSV
# exactly, hparams.yaml exactly, and the TensorBoard event file decoded by
# tests/tfevents-read.py, a reader written from the formats' specifications
# (it also checks every CRC, and compares with tensorboard's own reader
# where python3 has it); metrics.svg has a panel per metric.
set -u
. "${srcdir:-.}/tests/lib.sh"
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }

check_run() { # $1: the run's folder
  cd "$1" || exit 99
  printf 'step,loss,acc,val_loss,lr\r\n0,1.0,0.0,,\r\n1,0.5,0.25,,\r\n2,0.3333333333333333,0.5,,\r\n3,0.25,0.75,0.375,\r\n5,,,,0.5\r\n' >want.csv
  cmp -s want.csv out/csv/version_0/metrics.csv || { bad "$1: metrics.csv"; cat out/csv/version_0/metrics.csv; }
  printf "amsgrad: true\nlr: 0.001\nnested/depth: 2\noptimizer: adam\nwd: 1.0e-05\n" >want.yaml
  for d in "csv/version_0 4" "tb/run-a 5"; do # a panel (frame) per metric; TensorBoard's has hp_metric
    set -- "$1" $d
    cmp -s want.yaml out/$2/hparams.yaml || { bad "$1: $2/hparams.yaml"; cat out/$2/hparams.yaml; }
    test "$(grep -c '<rect x=' out/$2/metrics.svg)" = $3 || bad "$1: $2/metrics.svg has not $3 panels"
  done
  test "$(ls out/tb/run-a | grep -c '^events\.out\.tfevents\.')" = 1 || bad "$1: not one event file"
  python3 "$src/tests/tfevents-read.py" out/tb/run-a/events.out.tfevents.* >events.txt || bad "$1: the event file does not decode"
  cat >want.txt <<'EOT'
file_version brain.Event:2
step 0 scalar hp_metric -1.0
step 0 hparams experiment hparams=lr:FLOAT64,wd:FLOAT64,optimizer:STRING,nested/depth:FLOAT64,amsgrad:FLOAT64 metrics=hp_metric
step 0 hparams session_start lr=0.001 wd=1e-05 optimizer='adam' nested/depth=2.0 amsgrad=1.0
step 0 hparams session_end status=SUCCESS
step 0 scalar loss 1.0
step 0 scalar acc 0.0
step 1 scalar loss 0.5
step 1 scalar acc 0.25
step 2 scalar loss 0.3333333432674408
step 2 scalar acc 0.5
step 3 scalar loss 0.25
step 3 scalar acc 0.75
step 3 scalar val_loss 0.375
step 0 scalar lr 0.5
EOT
  cmp -s want.txt events.txt || { bad "$1: the events"; diff want.txt events.txt; }
  test "$(find out -type d -name 'version_*' | wc -l)" = 1 || bad "$1: more than one version directory (a rank > 0 wrote?)"
  exit $fail
}

mkdir "$tmp/single" "$tmp/ddp"
(cd "$tmp/single" && "$fs" "$src/tests/loggers/loggers.fab" >stdout 2>stderr) || bad "single-device run: $(cat "$tmp/single/stderr")"
grep -qx 'out/csv/version_0 out/tb/run-a 0 run-a' "$tmp/single/stdout" || bad "log_dir / version: $(cat "$tmp/single/stdout")"
grep -q 'CSVLogger: metrics in out/csv/version_0/' "$tmp/single/stderr" || bad "the run does not say where the CSV went"
(check_run "$tmp/single")
[ $? = 0 ] || fail=1
(cd "$tmp/ddp" && "$fs" "$src/tests/loggers/loggers.fab" -D strategy=ddp -D devices=2 >stdout 2>stderr) || bad "DDP run: $(cat "$tmp/ddp/stderr")"
(check_run "$tmp/ddp")
[ $? = 0 ] || fail=1
# a corrupt byte is caught by the reader's CRC check
f=$(ls "$tmp"/single/out/tb/run-a/events.out.tfevents.*)
printf 'X' | dd of="$f" bs=1 seek=40 conv=notrunc 2>/dev/null
python3 "$src/tests/tfevents-read.py" "$f" >/dev/null 2>&1 && bad "the reader accepts a corrupt file"
[ $fail = 0 ] && echo "PASS: loggers"
exit $fail
