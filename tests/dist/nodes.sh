#!/bin/sh
# nodes.sh -- a cpu run across two "nodes" on the loopback interface, joined
# over Gloo (docs/distributed.md, "Which transport runs when"): two launchers,
# NODE_RANK 0 and 1, devices=2 each, the same MASTER_ADDR and MASTER_PORT, as
# Lightning's default environment starts a run on every node:
#   - DDP x (2 nodes x 2 devices) gives the single device's 50 losses (1e-5
#     relative), on both nodes; also with the 4 ranks started as torchrun
#     starts them (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK);
#   - FSDP x (2 nodes x 2 devices) under --emulate-cuda (cpu ranks too, so
#     Gloo between the nodes) gives them as well;
#   - node 1 killed mid-run (SIGKILL to its launcher, its ranks die with it):
#     node 0 ends within 10 s, non-zero, naming a rank of node 1;
#   - a node started without MASTER_PORT says what every node needs.
# Skipped (77) when this build has no Gloo.
set -u
. "${srcdir:-.}/tests/lib.sh"
"$fs" --version > /dev/null 2>&1 || exit 99
grep -q '^#define FS_HAVE_GLOO 1' "$(dirname "$fs")/config.h" 2> /dev/null || {
  echo "nodes: this build has no Gloo (configure found no libgloo-dev): skipped"
  exit 77
}
cd "$tmp" || exit 99
unset FS_GLOO_MODULE # the module beside the program, as an uninstalled build finds it
export MASTER_ADDR=127.0.0.1 FS_COMM_TIMEOUT=20 # a hang fails, it does not wait 600 s

# A port free now (the kernel's pick); node 0's launcher binds it before its
# ranks start, and a port taken meanwhile makes node 0 fail at once saying
# so: then node 1 is stopped and both run again on another.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# two_nodes NAME ARGS...: node 1 in the background, node 0 here; NAME.0.out,
# NAME.1.out, NAME.*.err; status of node 0 in NAME.0.st, node 1's in NAME.1.st
two_nodes() {
  name=$1
  shift
  for try in 1 2 3; do
    MASTER_PORT=$(free_port) || return 1
    export MASTER_PORT
    NODE_RANK=1 timeout 30 "$fs" "$@" > $name.1.out 2> $name.1.err &
    n1=$!
    NODE_RANK=0 timeout 30 "$fs" "$@" > $name.0.out 2> $name.0.err
    echo $? > $name.0.st
    grep -q "cannot listen on .*Address already in use" $name.0.err && kill $n1
    wait $n1
    echo $? > $name.1.st
    grep -q "cannot listen on .*Address already in use" $name.0.err || return 0
  done
}

close() { # file file: every loss within 1e-5 relative, 50 steps
  paste "$1" "$2" | awk -v a="$1" -v b="$2" '
    { n++; d = $2 - $4; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2
      if ($1 != $3 || d > 1e-5 * m) { print a " vs " b ": step " $1 ": " $2 " vs " $4; bad = 1 } }
    END { if (n != 50) { print a ": " n " steps, not 50"; bad = 1 } ; exit bad }'
}

# 1. DDP on cpu: 2 nodes x 2 devices against one device
"$fs" "$src/tests/dist/train.fab" -D strategy=auto -D accelerator=cpu > single.txt 2> single.err || bad "single device: $(cat single.err)"
two_nodes ddp "$src/tests/dist/train.fab" -D strategy=ddp -D accelerator=cpu -D devices=2 -D num_nodes=2
[ "$(cat ddp.0.st) $(cat ddp.1.st)" = "0 0" ] || { bad "ddp: statuses $(cat ddp.0.st) $(cat ddp.1.st)"; cat ddp.0.err ddp.1.err; }
close single.txt ddp.0.out || bad "ddp 2 nodes x 2: node 0's losses differ from the single device's"
close single.txt ddp.1.out || bad "ddp 2 nodes x 2: node 1's losses differ from the single device's"

# 1b. the same ranks started by an outside launcher (torchrun's variables)
MASTER_PORT=$(free_port)
export MASTER_PORT
for r in 3 2 1 0; do
  RANK=$r WORLD_SIZE=4 LOCAL_RANK=$((r % 2)) LOCAL_WORLD_SIZE=2 NODE_RANK=$((r / 2)) timeout 30 \
    "$fs" "$src/tests/dist/train.fab" -D strategy=ddp -D accelerator=cpu -D devices=2 -D num_nodes=2 > torchrun.$r.out 2> torchrun.$r.err &
done
wait
close single.txt torchrun.0.out || { bad "torchrun's 4 ranks: losses differ from the single device's"; cat torchrun.*.err; }

# 2. FSDP (emulated cuda: cpu ranks, Gloo between the nodes)
two_nodes fsdp --emulate-cuda --gpus=2 "$src/tests/dist/train.fab" -D strategy=fsdp -D devices=2 -D num_nodes=2
[ "$(cat fsdp.0.st) $(cat fsdp.1.st)" = "0 0" ] || { bad "fsdp: statuses $(cat fsdp.0.st) $(cat fsdp.1.st)"; cat fsdp.0.err fsdp.1.err; }
close single.txt fsdp.0.out || bad "fsdp 2 nodes x 2: losses differ from the single device's"

# 3. node 1 killed once both are training
MASTER_PORT=$(free_port)
export MASTER_PORT
args="$src/tests/dist/train.fab -D strategy=ddp -D accelerator=cpu -D devices=2 -D num_nodes=2 -D epochs=1000000"
# the files exist before the nodes start: the wait below reads kill.0.out at
# once, and a background job may open its redirection after that read
: > kill.0.out
: > kill.1.out
NODE_RANK=1 "$fs" $args > kill.1.out 2> kill.1.err &
n1=$!
NODE_RANK=0 "$fs" $args > kill.0.out 2> kill.0.err &
n0=$!
i=0
while [ "$(wc -l < kill.0.out)" -lt 5 ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done
[ $i -lt 400 ] || bad "kill: node 0 never trained: $(cat kill.0.err kill.1.err)"
kill -KILL $n1
i=0
while kill -0 $n0 2> /dev/null && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done # 10 s
if kill -0 $n0 2> /dev/null; then
  bad "kill: node 0 still runs 10 s after node 1 was killed"
  kill -KILL $n0
fi
wait $n0
st=$?
wait $n1 2> /dev/null
echo "kill: node 0 ended within $((i * 50 + 50)) ms of node 1's death, status $st"
[ $st -ne 0 ] || bad "kill: node 0 exited 0"
grep -q "lost rank [23] (node 1)" kill.0.err || { bad "kill: node 0 does not name node 1"; cat kill.0.err; }

# 4. a node without MASTER_PORT
unset MASTER_PORT
NODE_RANK=1 "$fs" "$src/tests/dist/train.fab" -D strategy=ddp -D accelerator=cpu -D devices=2 -D num_nodes=2 > noport.out 2> noport.err
st=$?
[ $st -eq 1 ] || bad "no MASTER_PORT: status $st"
grep -q "num_nodes=2: start this script on every node with the same MASTER_PORT" noport.err || { bad "no MASTER_PORT: message"; cat noport.err; }

[ $fail -eq 0 ] && echo "nodes: all passed"
exit $fail
