#!/bin/sh
# valgrind-test.sh -- `make check-valgrind`: the regression scripts of
# tests/scripts/lang (VALGRIND_SCRIPTS overrides the paths) and the REPL's
# pty tests under valgrind's memcheck. Passes only with zero errors and zero
# definitely lost blocks in every process (tests/valgrind.supp lists leaks
# that are libedit's own).
fs=${FABRICSCRIPT:-./fabricscript}
top=${srcdir:-.}
command -v valgrind >/dev/null || { echo "SKIP: valgrind is not installed"; exit 77; }
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
vg="valgrind -q --trace-children=yes --leak-check=full --errors-for-leak-kinds=definite --suppressions=$top/tests/valgrind.supp --log-file=$logs/%p.log"
fail=0
# shellcheck disable=SC2086
FABRICSCRIPT_TEST_TIMEOUT=600 $vg "$fs" test ${VALGRIND_SCRIPTS:-$top/tests/scripts/lang} > "$logs/scripts.out" 2>&1 || { tail -20 "$logs/scripts.out"; fail=1; }
tail -1 "$logs/scripts.out"
REPL_WRAPPER="$vg" python3 "$top/tests/repl/repl_pty.py" "$fs" > "$logs/repl.out" 2>&1 || { cat "$logs/repl.out"; fail=1; }
tail -1 "$logs/repl.out"
for f in "$logs"/*.log; do
  [ -s "$f" ] || continue
  echo "valgrind reports ($f):"; head -40 "$f"; fail=1
done
[ $fail -eq 0 ] && echo "check-valgrind: no errors, no definite leaks"
exit $fail
