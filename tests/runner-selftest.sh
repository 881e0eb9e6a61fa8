#!/bin/sh
# runner-selftest.sh -- `fabricscript test` against itself: every
# tests/runner/fail-*.fab has a wrong expectation and must be reported as
# failed, for the reason its `# expect-fail:` line gives; every pass-*.fab
# must pass; the summary and the exit status must say so.
set -u
fs=${FABRICSCRIPT:-./fabricscript}
dir=${srcdir:-.}/tests/runner
bad=0
complain() { echo "runner-selftest: $*" >&2; bad=1; }

out=$("$fs" test "$dir")
status=$?
printf '%s\n' "$out"
[ "$status" -eq 1 ] || complain "exit status $status with failing fixtures, expected 1"
npass=0
nfail=0
for f in "$dir"/pass-*.fab; do
  npass=$((npass + 1))
  printf '%s\n' "$out" | grep -qxF "PASS $f" || complain "$f was not passed"
done
for f in "$dir"/fail-*.fab; do
  nfail=$((nfail + 1))
  why=$(sed -n 's/^# expect-fail: //p' "$f")
  [ -n "$why" ] || complain "$f has no '# expect-fail:' line"
  line=$(printf '%s\n' "$out" | grep -F "FAIL $f: ") || { complain "$f was not failed"; continue; }
  case $line in
    *"$why"*) ;;
    *) complain "$f failed, but not with \"$why\": $line" ;;
  esac
done
[ "$(printf '%s\n' "$out" | tail -n 1)" = "$npass passed, $nfail failed" ] ||
  complain "the last line is not '$npass passed, $nfail failed'"

"$fs" test "$dir"/pass-*.fab > /dev/null || complain "the passing fixtures alone exit non-zero"
exit $bad
