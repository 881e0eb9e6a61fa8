#!/bin/sh
# port-twin.sh -- runs the PyTorch twin tests/parity/port_NAME.py of the port
# examples/ports/NAME.fab (see tests/parity/ports_common.py); the
# run-port-*.test drivers call it. Skips (77) without Debian's torch or
# the Fashion-MNIST files.
PY=/usr/bin/python3
if ! OPENBLAS_NUM_THREADS=1 "$PY" -c 'import torch, numpy' >/dev/null 2>&1; then
  echo "SKIP: $PY cannot import torch and numpy (the PyTorch 1.13 peer); port $1 not checked"
  exit 77
fi
[ -d /usr/share/datasets/fashion-mnist ] || { echo "SKIP: no Fashion-MNIST data"; exit 77; }
srcdir=${srcdir:-$(dirname "$0")/../..}
export srcdir
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
OPENBLAS_NUM_THREADS=1 "$PY" "$srcdir/tests/parity/port_$1.py" "${FABRICSCRIPT:-./fabricscript}" "$tmp"
