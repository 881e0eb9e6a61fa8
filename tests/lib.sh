# lib.sh -- the start the test scripts share; a script sources it first,
#   . "${srcdir:-.}/tests/lib.sh"
# and has:
#   fs     the fabricscript binary (FABRICSCRIPT, else ./fabricscript) as an
#          absolute path, so the script may cd;
#   src    the source tree, absolute (automake's srcdir);
#   tmp    a fresh directory, removed at exit (a script that must undo more
#          at exit sets its own trap, removing $tmp too);
#   fail, bad MESSAGE   the verdict: bad prints "FAIL: MESSAGE" and sets
#          fail=1; the script ends with `exit $fail`.
fs=${FABRICSCRIPT:-./fabricscript}
case $fs in /*) ;; *) fs=$PWD/$fs ;; esac
src=$(cd "${srcdir:-.}" && pwd) || exit 99
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fs-test.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
