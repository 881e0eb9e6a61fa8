#!/bin/sh
# run-scripts.sh -- every regression script under tests/scripts through
# `fabricscript test` (one line per script, then `N passed, N failed`).
exec "${FABRICSCRIPT:-./fabricscript}" test "${srcdir:-.}/tests/scripts"
