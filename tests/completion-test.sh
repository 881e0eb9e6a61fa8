#!/bin/bash
# completion-test.sh -- the bash completion (completions/fabricscript.bash)
# offers what the binary has: subcommands, options and their values, rule
# ids after `explain`, scripts and directories.
src=${srcdir:-.}
bin=$(cd "$(dirname "${FABRICSCRIPT:-./fabricscript}")" && pwd)
PATH=$bin:$PATH
source "$src/completions/fabricscript.bash" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
offers() { # want... -- words...: COMPREPLY for the words (the last one is being typed) has each want
  local want=() w
  while [[ $1 != -- ]]; do want+=("$1"); shift; done
  shift
  COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=()
  _fabricscript 2>/dev/null
  for w in "${want[@]}"; do
    [[ " ${COMPREPLY[*]} " == *" $w "* ]] || { echo "FAIL: '$*' does not offer '$w' (offers: ${COMPREPLY[*]})"; fail=1; }
  done
}
refuses() { # unwanted -- words...
  local no=$1; shift 2
  COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=()
  _fabricscript 2>/dev/null
  [[ " ${COMPREPLY[*]} " != *" $no "* ]] || { echo "FAIL: '$*' offers '$no'"; fail=1; }
}
offers check plan explain test -- fabricscript ""
offers check -- fabricscript ch
offers R36 -- fabricscript explain R3
offers R36 -- fabricscript explain r3
offers W9 -- fabricscript explain W
offers --devices= --diagnostics-format= -- fabricscript check --d
offers --emulate-cuda -- fabricscript --em
offers sarif -- fabricscript check --diagnostics-format=s
offers tap junit -- fabricscript test --format=
offers json -- fabricscript plan --format=
refuses tap -- fabricscript plan --format=
mkdir "$tmp/dir" && touch "$tmp/a.fab" "$tmp/b.py" "$tmp/c.txt"
offers "$tmp/a.fab" "$tmp/b.py" "$tmp/dir" -- fabricscript check "$tmp/"
refuses "$tmp/c.txt" -- fabricscript check "$tmp/"
# every rule id the binary explains is offered
n=$(fabricscript explain | wc -l)
COMP_WORDS=(fabricscript explain ""); COMP_CWORD=2; _fabricscript
[ "${#COMPREPLY[@]}" -eq "$n" ] && [ "$n" -gt 50 ] || { echo "FAIL: explain offers ${#COMPREPLY[@]} ids of $n"; fail=1; }
[ $fail -eq 0 ] && echo "completion-test: all passed"
exit $fail
