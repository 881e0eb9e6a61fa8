#!/bin/sh
# python-syntax.sh -- Python's grammar against CPython 3.11's: every file of
# tests/python/errors (one syntax error each) is rejected by both at the same
# line, and every file of tests/python/valid (the corners of the grammar) and
# of a fixed sample of real code (tests/python/corpus-sample.txt) that
# CPython accepts is accepted. The whole corpora:
# scripts/parse-corpus (docs/python.md). Skips without /usr/bin/python3.11.
python=${PYTHON311:-/usr/bin/python3.11}
if [ ! -x "$python" ]; then
  echo "SKIP: $python is not installed (CPython 3.11 is the oracle)"
  exit 77
fi
srcdir=${srcdir:-.}
exec "$python" "$srcdir/scripts/parse-corpus" --bin ./tests/bench/parse_corpus \
  --errors "$srcdir/tests/python/errors" --sample "$srcdir/tests/python/corpus-sample.txt" \
  "$srcdir/tests/python/valid"
