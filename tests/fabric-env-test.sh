#!/bin/sh
# fabric-env-test.sh -- what a regression script cannot set: the
# environment Fabric reads (PL_GLOBAL_SEED for seed_everything(), LT_CLI_USED
# for `fabric run`), the order of fabric.print lines and progress lines
# when both streams go into one pipe, and a save into directories that do
# not exist yet.
. "${srcdir:-.}/tests/lib.sh"

cat > "$tmp/seed.fab" <<'FAB'
fabric = Fabric(accelerator="cpu", devices=1)
print(fabric.seed_everything())
FAB
out=$(PL_GLOBAL_SEED=42 "$fs" "$tmp/seed.fab" 2>&1)
[ "$out" = 42 ] || bad "PL_GLOBAL_SEED=42: got '$out'"
out=$(PL_GLOBAL_SEED=abc "$fs" "$tmp/seed.fab" 2>&1); rc=$?
[ $rc = 1 ] || bad "PL_GLOBAL_SEED=abc: exit $rc"
case $out in *"ValueError: Invalid seed specified via PL_GLOBAL_SEED: 'abc'"*) ;; *) bad "PL_GLOBAL_SEED=abc: $out";; esac
out=$(PL_GLOBAL_SEED=4294967296 "$fs" "$tmp/seed.fab" 2>&1)
case $out in *"4294967296 is not in bounds, numpy accepts from 0 to 4294967295"*) ;; *) bad "PL_GLOBAL_SEED out of bounds: $out";; esac

cat > "$tmp/cli.fab" <<'FAB'
fabric = Fabric(accelerator="cpu", strategy="ddp")
total = fabric.all_reduce(fabric.global_rank + 1, reduce_op="sum")
fabric.print("world", fabric.world_size, "sum", total.item())
FAB
out=$(LT_CLI_USED=1 "$fs" --devices=2 "$tmp/cli.fab" 2>&1)
[ "$out" = "world 2 sum 3" ] || bad "LT_CLI_USED=1 --devices=2: got '$out'"

cat > "$tmp/order.fab" <<'FAB'
fabric = Fabric(accelerator="cpu", strategy=param("strategy", "auto"), devices=param("devices", 1))
fabric.launch()
loader = fabric.setup_dataloaders(DataLoader(RandomDataset(64, 4, 3, 0), batch_size=8))
for epoch in range(2):
    fabric.print("start", epoch)
    for x, y in loader:
        pass
    fabric.print("end", epoch)
FAB
for args in "" "-D strategy=ddp -D devices=2"; do
  # shellcheck disable=SC2086
  got=$("$fs" $args "$tmp/order.fab" 2>&1 | sed 's/^\(epoch [0-9]\/[0-9]\).*/\1/' | tr '\n' '|')
  want="start 0|epoch 1/2|end 0|start 1|epoch 2/2|end 1|"
  [ "$got" = "$want" ] || bad "print/progress order ($args): '$got'"
done
# fabric.save makes the checkpoint's parent directories (a fresh place each
# time: tests/scripts/fabric/save_nested.fab cannot know they are new)
cat > "$tmp/save.fab" <<'FAB'
fabric = Fabric(accelerator="cpu", devices=1)
fabric.save(param("path", ""), {"step": 3, "d": {"a": [1, 2]}})
print(fabric.load(param("path", "")))
FAB
out=$("$fs" -D path="$tmp/new/dir/x.ckpt" "$tmp/save.fab" 2>/dev/null)
[ "$out" = "{'step': 3, 'd': {'a': [1, 2]}}" ] && [ -f "$tmp/new/dir/x.ckpt" ] || bad "save into new directories: '$out'"
[ $fail = 0 ] && echo "PASS fabric-env-test"
exit $fail
