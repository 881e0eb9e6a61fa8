#!/bin/sh
# cli-test.sh -- the command line's contract: exit statuses (0 ok, 1 script
# errors, 2 bad invocation, 3 system failure), --help, --version, -D.
fs=${FABRICSCRIPT:-./fabricscript}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect() { # status command...
  want=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  [ "$got" -eq "$want" ] || { echo "FAIL: '$*' exited $got, expected $want"; cat "$tmp/err"; fail=1; }
}
printf 'x = param("lr", 0.1)\nprint(f"lr {x}")\n' > "$tmp/ok.fab"
printf 'print(nope)\n' > "$tmp/bad.fab"
printf 'x = (1,\n' > "$tmp/syntax.fab"

expect 0 "$fs" "$tmp/ok.fab"
grep -qx "lr 0.1" "$tmp/out" || { echo "FAIL: the script's output: $(cat "$tmp/out")"; fail=1; }
expect 0 "$fs" -D lr=0.5 "$tmp/ok.fab"
grep -qx "lr 0.5" "$tmp/out" || { echo "FAIL: -D lr=0.5 not applied: $(cat "$tmp/out")"; fail=1; }
expect 0 "$fs" "$tmp/ok.fab" -D lr=0.5        # GNU-style: options after the file
expect 0 "$fs" check "$tmp/ok.fab"
expect 1 "$fs" "$tmp/bad.fab"
expect 1 "$fs" check "$tmp/syntax.fab"
grep -q "syntax.fab:1:5: error: '(' was never closed" "$tmp/err" || { echo "FAIL: no file:line:col for a syntax error"; fail=1; }
# a .py file is checked, not run: exit status as `check`'s, and the way to run it
printf 'import torch\nprint("ran")\n' > "$tmp/train.py"
expect 0 "$fs" "$tmp/train.py"
[ ! -s "$tmp/out" ] || { echo "FAIL: a .py file ran: $(cat "$tmp/out")"; fail=1; }
grep -q "train.py: Python files are checked, not run; run it with \`fabric run .*train.py\` or \`python .*train.py\`" "$tmp/err" ||
  { echo "FAIL: no word that a .py file is not run: $(cat "$tmp/err")"; fail=1; }
printf 'def f(:\n' > "$tmp/broken.py"
expect 1 "$fs" "$tmp/broken.py"
expect 2 "$fs" -D lr=abc "$tmp/ok.fab"       # a -D value its param() cannot take
expect 2 "$fs" -D lr "$tmp/ok.fab"
expect 2 "$fs" --no-such-option "$tmp/ok.fab"
expect 2 "$fs" --color=sometimes "$tmp/ok.fab"
expect 2 "$fs" --diagnostics-format=xml "$tmp/ok.fab"
expect 2 "$fs" check
expect 3 "$fs" "$tmp/missing.fab"
expect 3 "$fs" check "$tmp"                   # a directory
expect 0 "$fs" --help
grep -q "^Usage: fabricscript" "$tmp/out" || { echo "FAIL: --help"; fail=1; }
expect 0 "$fs" --version
grep -q "^backends: cpu" "$tmp/out" || { echo "FAIL: --version lists no backends"; fail=1; }
expect 1 "$fs" check --diagnostics-format=json "$tmp/bad.fab"
[ -s "$tmp/err" ] && ! grep -qv '^{' "$tmp/err" || { echo "FAIL: json mode wrote a line that is not JSON"; fail=1; }
[ $fail -eq 0 ] && echo "cli-test: all passed"
exit $fail
