#!/bin/sh
# python-rules.sh -- every rule, on Python (issue 19, point 6): each trigger
# and near-miss script of tests/scripts/rules/ that is valid Python (no
# `model` block, `repeat` or `residual`) is checked as FabricScript and, copied
# byte for byte, as a .py file; the two must give the same diagnostics: rule,
# line, column, message, notes, help and fix-its (JSON, the file name aside).
fs=${FABRICSCRIPT:-./fabricscript}
fs=$(cd "$(dirname "$fs")" && pwd)/$(basename "$fs")
srcdir=${srcdir:-.}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 fail=0
for fab in "$srcdir"/tests/scripts/rules/*.fab; do
  grep -qE '^ *(model|repeat|residual)\b' "$fab" && continue
  name=$(basename "$fab" .fab)
  cp "$fab" "$tmp/$name.fab"
  cp "$fab" "$tmp/$name.py"
  args=$(sed -n 's/^# args: //p' "$fab")
  # shellcheck disable=SC2086  # the annotation's words are separate arguments
  # rules `unsupported` and R70 are about running a .fab (a .py is checked, never run)
  (cd "$tmp" && CUDA_VISIBLE_DEVICES= "$fs" check --diagnostics-format=json $args "$name.fab" 2>&1 |
     grep -v '"rule":"unsupported"\|"rule":"R70"' | sed "s/$name\.fab/FILE/g" >"$name.fab.out")
  # shellcheck disable=SC2086
  (cd "$tmp" && CUDA_VISIBLE_DEVICES= "$fs" check --diagnostics-format=json $args "$name.py" 2>&1 |
     sed "s/$name\.py/FILE/g" >"$name.py.out")
  n=$((n + 1))
  if ! cmp -s "$tmp/$name.fab.out" "$tmp/$name.py.out"; then
    echo "FAIL: $name: the .py copy's diagnostics differ"
    diff "$tmp/$name.fab.out" "$tmp/$name.py.out" | head -10
    fail=1
  fi
done
[ "$n" -gt 50 ] || { echo "FAIL: only $n rule scripts compared"; fail=1; }
# the comparison means something only if the checker ran and reported
errs=$(cat "$tmp"/*.fab.out | grep -c '"severity":"error","rule":"R')
[ "$errs" -gt 50 ] || { echo "FAIL: only $errs rule errors reported: $(head -3 "$tmp"/r1_*.fab.out)"; fail=1; }
[ $fail -eq 0 ] && echo "python-rules: $n rule scripts give the same diagnostics as .py files"
exit $fail
