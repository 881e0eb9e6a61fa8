#!/bin/sh
# progress-test.sh -- a loop over a loader with stderr not a terminal: plain
# progress lines on stderr (every FABRICSCRIPT_PROGRESS_INTERVAL seconds and
# at each epoch's end, rank 0 only under DDP and FSDP, no control
# characters), stdout untouched; "epoch k/n" from the enclosing
# `for epoch in range(n)`, validation passes (under no_grad) labelled, and
# none at all with FABRICSCRIPT_PROGRESS=0 or --no-progress.
. "${srcdir:-.}/tests/lib.sh"
cat > "$tmp/train.fab" <<'FAB'
model Tiny():
    Linear(4, 8)
    ReLU()
    Linear(8, 3)

fabric = Fabric(accelerator=param("accelerator", "cpu"), strategy=param("strategy", "auto"), devices=param("devices", 1))
fabric.launch()
fabric.seed_everything(1)
model = fabric.setup_module(Tiny())
optimizer = fabric.setup_optimizers(SGD(model.parameters(), lr=0.1))
loader = fabric.setup_dataloaders(DataLoader(RandomDataset(64, 4, 3, 0), batch_size=8))
val_loader = fabric.setup_dataloaders(DataLoader(RandomDataset(32, 4, 3, 1), batch_size=8))
for epoch in range(2):
    for x, y in loader:
        loss = cross_entropy(model(x), y)
        optimizer.zero_grad()
        fabric.backward(loss)
        optimizer.step()
    if param("validate", False):
        with no_grad():
            for x, y in val_loader:
                model(x)
fabric.print("done")
FAB
line='^epoch [12]/2  [1-8]/8 \[[=> ]{20}\]  [0-9.]+ (it/s|s/it)  loss [0-9]+\.[0-9]{4}  (ETA|time) [0-9]{2}:[0-9]{2}:[0-9]{2}$'

FABRICSCRIPT_PROGRESS_INTERVAL=0 "$fs" "$tmp/train.fab" >"$tmp/out" 2>"$tmp/err" || bad "interval 0: exit $?"
[ "$(cat "$tmp/out")" = done ] || bad "stdout is not the script's alone: $(cat "$tmp/out")"
[ "$(grep -cE "$line" "$tmp/err")" -eq 16 ] || bad "interval 0: not a line per step: $(cat "$tmp/err")"
[ "$(wc -l < "$tmp/err")" -eq 16 ] || bad "interval 0: other lines on stderr: $(cat "$tmp/err")"
[ "$(grep -c ' time ' "$tmp/err")" -eq 2 ] || bad "not one end line per epoch"
tr -d '\r\033' < "$tmp/err" | cmp -s - "$tmp/err" || bad "a carriage return or escape in plain lines"

"$fs" "$tmp/train.fab" >"$tmp/out" 2>"$tmp/err" || bad "default interval: exit $?"
[ "$(grep -cE "$line" "$tmp/err")" -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 2 ] ||
  bad "default interval: not just the two epochs' ends: $(cat "$tmp/err")"

"$fs" -D strategy=ddp -D devices=2 "$tmp/train.fab" >"$tmp/out" 2>"$tmp/err" || bad "ddp: exit $?"
[ "$(grep -c '^epoch [12]/2  4/4 .* time ' "$tmp/err")" -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 2 ] ||
  bad "ddp: not rank 0's two lines alone: $(cat "$tmp/err")"

"$fs" --emulate-cuda -D accelerator=cuda -D strategy=fsdp -D devices=2 "$tmp/train.fab" >"$tmp/out" 2>"$tmp/err" || bad "fsdp: exit $?"
[ "$(grep -c '^epoch [12]/2  4/4 .* time ' "$tmp/err")" -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 2 ] ||
  bad "fsdp: not rank 0's two lines alone: $(cat "$tmp/err")"

"$fs" -D validate=True "$tmp/train.fab" >"$tmp/out" 2>"$tmp/err" || bad "validate: exit $?"
[ "$(grep -cE '^val epoch [12]/2  4/4 \[=+\]  [0-9.]+ (it/s|s/it)  time ' "$tmp/err")" -eq 2 ] &&
  [ "$(grep -c '^epoch [12]/2  8/8 .* time ' "$tmp/err")" -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 4 ] ||
  bad "validation passes are not labelled 'val epoch k/n': $(cat "$tmp/err")"

FABRICSCRIPT_PROGRESS=0 FABRICSCRIPT_PROGRESS_INTERVAL=0 "$fs" "$tmp/train.fab" >"$tmp/out" 2>"$tmp/err" || bad "off: exit $?"
[ -s "$tmp/err" ] && bad "FABRICSCRIPT_PROGRESS=0: progress on stderr: $(cat "$tmp/err")"
[ "$(cat "$tmp/out")" = done ] || bad "FABRICSCRIPT_PROGRESS=0: the script's output changed"
FABRICSCRIPT_PROGRESS_INTERVAL=0 "$fs" --no-progress "$tmp/train.fab" >"$tmp/out" 2>"$tmp/err" || bad "--no-progress: exit $?"
[ -s "$tmp/err" ] && bad "--no-progress: progress on stderr: $(cat "$tmp/err")"
FABRICSCRIPT_PROGRESS=off "$fs" "$tmp/train.fab" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q FABRICSCRIPT_PROGRESS "$tmp/err" || bad "a bad FABRICSCRIPT_PROGRESS is not a usage error"

"$fs" --diagnostics-format=json "$tmp/train.fab" >"$tmp/out" 2>"$tmp/err" || bad "json: exit $?"
[ -s "$tmp/err" ] && bad "json diagnostics: progress on stderr: $(cat "$tmp/err")"

FABRICSCRIPT_PROGRESS_INTERVAL=soon "$fs" "$tmp/train.fab" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q PROGRESS_INTERVAL "$tmp/err" || bad "a bad interval is not a usage error"
[ $fail -eq 0 ] && echo "progress-test: all passed"
exit $fail
