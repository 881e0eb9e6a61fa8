#!/bin/sh
# check-limits-test.sh -- `check` always ends (issue 18.5): long tokens, big
# literals and exponential analyses end, the budget says where it stopped,
# the error limit caps text output. Asserts outcomes, never times (the
# figures are scripts/bench-limits').
. "${srcdir:-.}/tests/lib.sh"
expect() { # status command...
  want=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  [ "$got" -eq "$want" ] || { bad "'$*' exited $got, expected $want"; head -c 2000 "$tmp/err"; }
}
gen() { # file python-expression-printing-the-script
  python3 -c "$2" > "$tmp/$1" || bad "cannot generate $1"
}

# A 10 MB line and an 80,000-key dict literal: lexing is linear.
gen long_line.py 'print("s = \"" + "x" * 10_000_000 + "\"\nprint(len(s))")'
expect 0 "$fs" check "$tmp/long_line.py"
gen big_dict.fab 'print("d = {" + ", ".join(f"\"k{i}\": {i}" for i in range(80000)) + "}\nprint(d[\"k79999\"])")'
expect 0 "$fs" check "$tmp/big_dict.fab"
expect 0 "$fs" "$tmp/big_dict.fab" # and the run builds it (the dict's index, not a scan per key)
grep -qx 79999 "$tmp/out" || bad "the 80,000-key dict's run printed: $(head -c 200 "$tmp/out")"

# Strings the check cannot afford are unknown, not computed.
printf 's = "x"\nfor i in range(40):\n    s = s + s\nprint(len(s))\n' > "$tmp/doubling.fab"
expect 0 "$fs" check "$tmp/doubling.fab"
printf 's = "x" * 10**15\nt = "y" * 10**9\nprint(len(s))\n' > "$tmp/huge_repeat.fab"
expect 0 "$fs" check "$tmp/huge_repeat.fab"
printf 'model M:\n    h = repeat 10**9:\n        Linear(4, 4)\nm = M()\n' > "$tmp/repeat.fab"
expect 0 "$fs" check "$tmp/repeat.fab"

# Exponentially many analyses: the budget ends them and says where.
gen calls.py 'print("def f0(x):\n    return x + 1")
for i in range(1, 40): print(f"def f{i}(x):\n    return f{i-1}(x) + f{i-1}(x)")
print("print(f39(1))")'
expect 0 "$fs" check --check-budget=1 "$tmp/calls.py"
grep -q "warning\[budget\]: the check's budget of 1 s is spent\|warning\[budget\]: the check's budget of 1 GiB is spent" "$tmp/err" ||
  bad "no budget warning for 2^39 calls: $(head -c 600 "$tmp/err")"
expect 0 "$fs" check --check-budget=60,32MiB "$tmp/calls.py"
grep -q "warning\[budget\]: the check's budget of 32 MiB is spent" "$tmp/err" ||
  bad "no memory-budget warning: $(head -c 600 "$tmp/err")"
# what was found before the budget ran out is still reported
printf 'print(nope)\n' >> "$tmp/calls.py"
sed -i '1i print(undefined_first)' "$tmp/calls.py"
expect 1 "$fs" check --check-budget=1 "$tmp/calls.py"
grep -q "name 'undefined_first' is not defined" "$tmp/err" || bad "an error before the budget ran out was lost"
expect 2 "$fs" check --check-budget=0 "$tmp/calls.py"
expect 2 "$fs" check --check-budget=1,12XB "$tmp/calls.py"
expect 2 "$fs" check --check-budget=1,10 "$tmp/calls.py" # less than 1 MiB
expect 2 "$fs" check --check-budgt=1 "$tmp/calls.py"
grep -q "did you mean '--check-budget'" "$tmp/err" || bad "no did-you-mean for --check-budgt"

# The error limit: 20 errors in text, then one line; JSON carries all.
gen many.fab 'for i in range(30): print(f"print(nope{i})")'
expect 1 "$fs" check "$tmp/many.fab"
[ "$(grep -c 'error\[name\]' "$tmp/err")" -eq 20 ] || bad "text shows $(grep -c 'error\[name\]' "$tmp/err") errors, expected 20"
grep -qx "30 errors" "$tmp/err" || bad "the closing line does not count every error"
grep -qx "not shown: 10 more errors after the first 20 errors (--error-limit=N shows N, 0 all)" "$tmp/err" ||
  bad "no line saying how many more: $(tail -2 "$tmp/err")"
expect 1 "$fs" check --error-limit=0 "$tmp/many.fab"
[ "$(grep -c 'error\[name\]' "$tmp/err")" -eq 30 ] || bad "--error-limit=0 does not show all"
expect 1 "$fs" check --error-limit=3 "$tmp/many.fab"
[ "$(grep -c 'error\[name\]' "$tmp/err")" -eq 3 ] || bad "--error-limit=3 does not show 3"
expect 1 "$fs" check --diagnostics-format=json "$tmp/many.fab"
[ "$(wc -l < "$tmp/err")" -eq 30 ] || bad "JSON is capped: $(wc -l < "$tmp/err") lines"
expect 2 "$fs" check --error-limit=-1 "$tmp/many.fab"
exit $fail
