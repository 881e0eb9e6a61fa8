#!/bin/sh
# repl-test.sh -- the interactive session through a pseudo-terminal.
command -v python3 >/dev/null || { echo "SKIP: python3 is needed to drive a pseudo-terminal"; exit 77; }
exec python3 "${srcdir:-.}/tests/repl/repl_pty.py" "${FABRICSCRIPT:-./fabricscript}"
