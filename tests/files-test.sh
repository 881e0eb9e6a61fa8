#!/bin/sh
# files-test.sh -- files are what they claim (issue 18, point 4): fabric.save
# refuses a destination that is not a regular file and writes through a
# symbolic link to its target; readers of data sets and checkpoints refuse
# FIFOs, devices and directories at once (no hang); a stale temporary file
# of an interrupted save is swept by the next save to that path; fix --write
# keeps the file's mode and writes through a symbolic link.
. "${srcdir:-.}/tests/lib.sh"
trap 'umount "$tmp/full" 2>/dev/null; rm -rf "$tmp"' EXIT
# run SCRIPT: runs it with a 10 s bound (a hang is a failure, not a stuck suite)
run() { timeout 10 "$fs" "$@" >"$tmp/out" 2>"$tmp/err"; }

cat > "$tmp/save.fab" <<'FAB'
fabric = Fabric(accelerator="cpu", devices=1)
model = fabric.setup_module(Linear(2, 2))
fabric.save(param("path", ""), {"model": model, "step": 3})
print("saved")
FAB
cat > "$tmp/load.fab" <<'FAB'
fabric = Fabric(accelerator="cpu", devices=1)
model = fabric.setup_module(Linear(2, 2))
print(fabric.load(param("path", ""), {"model": model}))
FAB

for ext in safetensors ckpt; do
  # a FIFO as the destination: refused, and still a FIFO
  mkfifo "$tmp/fifo.$ext"
  run -D path="$tmp/fifo.$ext" "$tmp/save.fab"
  [ $? -eq 1 ] || bad "save over a FIFO (.$ext) did not fail: $(cat "$tmp/err")"
  grep -q "is a FIFO, not a regular file" "$tmp/err" || bad "save over a FIFO (.$ext): $(cat "$tmp/err")"
  [ -p "$tmp/fifo.$ext" ] || bad "save replaced the FIFO fifo.$ext"
  # a FIFO to read: refused at once
  run -D path="$tmp/fifo.$ext" "$tmp/load.fab"
  rc=$?
  [ $rc -eq 1 ] || bad "load of a FIFO (.$ext) exited $rc: $(cat "$tmp/err")"
  grep -q "is a FIFO, not a regular file" "$tmp/err" || bad "load of a FIFO (.$ext): $(cat "$tmp/err")"
  # a directory, a device
  mkdir "$tmp/dir.$ext"
  run -D path="$tmp/dir.$ext" "$tmp/save.fab"
  grep -q "is a directory, not a regular file" "$tmp/err" || bad "save over a directory (.$ext): $(cat "$tmp/err")"
  run -D path="$tmp/dir.$ext" "$tmp/load.fab"
  grep -q "is a directory, not a regular file" "$tmp/err" || bad "load of a directory (.$ext): $(cat "$tmp/err")"
  ln -s /dev/null "$tmp/null.$ext"
  run -D path="$tmp/null.$ext" "$tmp/load.fab"
  grep -q "is a device, not a regular file" "$tmp/err" || bad "load of a device (.$ext): $(cat "$tmp/err")"
  run -D path="$tmp/null.$ext" "$tmp/save.fab"
  grep -q "is a device, not a regular file" "$tmp/err" || bad "save over a device (.$ext): $(cat "$tmp/err")"
  [ -L "$tmp/null.$ext" ] && [ -c /dev/null ] || bad "save replaced the link to /dev/null"

  # a symbolic link: the save lands in its target, the link stays a link
  mkdir "$tmp/real"
  ln -s real/target.$ext "$tmp/link.$ext"
  run -D path="$tmp/link.$ext" "$tmp/save.fab" || bad "save through a link (.$ext): $(cat "$tmp/err")"
  [ -L "$tmp/link.$ext" ] || bad "save replaced the link link.$ext by a file"
  [ -f "$tmp/real/target.$ext" ] || bad "save did not write the link's target (.$ext)"
  run -D path="$tmp/link.$ext" "$tmp/load.fab" || bad "load through a link (.$ext): $(cat "$tmp/err")"
  grep -qx "{'step': 3}" "$tmp/out" || bad "load through a link (.$ext): $(cat "$tmp/out")"

  # a stale temporary file of a writer that died is swept by the next save;
  # a live writer's stays
  dead=$(sh -c 'echo $$')
  : > "$tmp/real/target.$ext.tmp.$dead.0"
  : > "$tmp/real/target.$ext.tmp.$$.0"
  chmod 640 "$tmp/real/target.$ext"
  run -D path="$tmp/real/target.$ext" "$tmp/save.fab" || bad "save (.$ext): $(cat "$tmp/err")"
  [ -e "$tmp/real/target.$ext.tmp.$dead.0" ] && bad "the stale temporary file of pid $dead was not swept (.$ext)"
  [ -e "$tmp/real/target.$ext.tmp.$$.0" ] || bad "a live writer's temporary file was swept (.$ext)"
  [ "$(stat -c %a "$tmp/real/target.$ext")" = 640 ] || bad "save did not keep the checkpoint's mode (.$ext)"
  rm -rf "$tmp/real" "$tmp/link.$ext"
done

# data sets: a FIFO or a directory is refused at once
mkfifo "$tmp/text.fifo"
printf 'ds = TextDataset(param("path", ""), 4)\nprint(len(ds))\n' > "$tmp/text.fab"
run -D path="$tmp/text.fifo" "$tmp/text.fab"
grep -q "is a FIFO, not a regular file" "$tmp/err" || bad "TextDataset of a FIFO: $(cat "$tmp/err")"
run -D path="$tmp" "$tmp/text.fab"
grep -q "is a directory, not a regular file" "$tmp/err" || bad "TextDataset of a directory: $(cat "$tmp/err")"
mkdir "$tmp/mnist"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  mkfifo "$tmp/mnist/$f"
done
printf 'ds = MNIST(root=param("root", ""))\nprint(len(ds))\n' > "$tmp/mnist.fab"
run -D root="$tmp/mnist" "$tmp/mnist.fab"
grep -q "is a FIFO, not a regular file" "$tmp/err" || bad "MNIST of FIFOs: $(cat "$tmp/err")"

# fix --write keeps the mode and writes through a link
printf 'fabric = Fabric(accelerator="cpu", devices=1)\nprint(fabric.global_rnak)\n' > "$tmp/fixme.fab"
chmod 750 "$tmp/fixme.fab"
ln -s fixme.fab "$tmp/fixlink.fab"
"$fs" fix --write "$tmp/fixlink.fab" >"$tmp/out" 2>"$tmp/err" || bad "fix --write: $(cat "$tmp/err")"
[ -L "$tmp/fixlink.fab" ] || bad "fix --write replaced the link by a file"
grep -q "global_rank" "$tmp/fixme.fab" || bad "fix --write did not fix the link's target: $(cat "$tmp/fixme.fab")"
[ "$(stat -c %a "$tmp/fixme.fab")" = 750 ] || bad "fix --write changed the mode to $(stat -c %a "$tmp/fixme.fab")"
ls "$tmp" | grep -q 'tmp' && bad "fix --write left a temporary file: $(ls "$tmp")"

# A full disk (issue 18, point 7): the save is a clear error naming the file,
# exit 3 (a system failure), and leaves nothing behind. Needs a small tmpfs,
# which only root can mount; said and skipped otherwise.
mkdir "$tmp/full"
if mount -t tmpfs -o size=64k tmpfs "$tmp/full" 2>/dev/null; then
  cat > "$tmp/big.fab" <<'FAB'
fabric = Fabric(accelerator="cpu", devices=1)
model = fabric.setup_module(Linear(512, 512))
fabric.save(param("path", ""), {"model": model})
FAB
  run "$tmp/big.fab" -D path="$tmp/full/ck.pt"
  st=$?
  [ $st -eq 3 ] && grep -q "full/ck.pt: .*No space left on device" "$tmp/err" ||
    bad "a save on a full disk: status $st: $(cat "$tmp/err")"
  [ -z "$(ls -A "$tmp/full")" ] || bad "a save on a full disk left $(ls -A "$tmp/full")"
  umount "$tmp/full"
else
  echo "files-test: no tmpfs could be mounted (not root): the full-disk case is not run"
fi

[ $fail -eq 0 ] && echo "files-test: ok"
exit $fail
