#!/bin/sh
# examples-test.sh -- every command an example's header shows
# ("#   fabricscript examples/NAME.fab ...", examples/ports/ too) runs as written and exits 0, with
# only its length shortened (-D steps / -D epochs, and -D train_batches /
# test_batches where the example has them, and the options of the example's
# "# suite: -D ..." line, which shrink a model) to keep the suite quick:
# a new user's first command must work (issue 18, point 8).
. "${srcdir:-.}/tests/lib.sh"
[ -d /usr/share/datasets/fashion-mnist ] || { echo "SKIP: no Fashion-MNIST data"; exit 77; }
n=0
for ex in "$src"/examples/*.fab "$src"/examples/ports/*.fab; do
  # the header's commands in order: fabricscript runs, and the python3 lines
  # that prepare their inputs (a token file) in the same directory
  grep -E '^#   (fabricscript examples/|python3 )' "$ex" | sed 's/^#   //' > "$tmp/cmds"
  suite=$(sed -n 's/^# suite: //p' "$ex")
  while IFS= read -r cmd; do
    case $cmd in
      python3\ *)
        (cd "$tmp" && sh -c "$cmd") || { echo "FAIL: '$cmd' (preparing an input) exited $?"; fail=1; }
        continue ;;
    esac
    cmd=${cmd#fabricscript }
    n=$((n + 1))
    short=$(printf '%s\n' "$cmd" | sed 's/-D steps=[0-9]*/-D steps=3/; s/-D epochs=[0-9]*/-D epochs=1/; s/-D max_iters=[0-9]*/-D max_iters=3/')
    [ -z "$suite" ] || short="$short $suite"
    # an example that can stop an epoch early (cnn.fab) does, after 20 batches
    if grep -q 'param("train_batches"' "$ex" && ! printf '%s' "$short" | grep -q train_batches; then
      short="$short -D train_batches=20 -D test_batches=2"
    fi
    # shellcheck disable=SC2086 # the command's words, as the header writes them
    (cd "$tmp" && ln -sfn "$src/examples" examples && timeout 300 "$fs" $short >"$tmp/cmd.out" 2>"$tmp/cmd.err")
    rc=$?
    [ $rc -eq 0 ] || { echo "FAIL: '$cmd' exited $rc:"; tail -5 "$tmp/cmd.err"; fail=1; }
  done < "$tmp/cmds"
done
[ $n -ge 3 ] || { echo "FAIL: found $n header commands in examples/"; fail=1; }
[ $fail -eq 0 ] && echo "examples-test: $n header commands ran"
exit $fail
