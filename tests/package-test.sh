#!/bin/sh
# package-test.sh -- scripts/package-deb builds a package from this build
# tree; installed into a scratch root (dpkg -x), it runs: --version, a check
# that finds the seed's mistake, a short run, the man page, the docs and the
# bash completion are where `make install` puts them.
command -v dpkg-deb >/dev/null || { echo "SKIP: dpkg-deb is needed"; exit 77; }
src=${srcdir:-.}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
fails() { echo "FAIL: $*"; fail=1; }
deb=$("$src/scripts/package-deb" . "$tmp") || { echo "FAIL: package-deb"; exit 1; }
[ -f "$deb" ] || { echo "FAIL: no package at '$deb'"; exit 1; }
dpkg-deb --field "$deb" Package Version Depends >"$tmp/fields" || fails "dpkg-deb cannot read $deb"
grep -q '^Depends: .*libc6' "$tmp/fields" || fails "Depends lacks libc6: $(cat "$tmp/fields")"
dpkg -x "$deb" "$tmp/root"
fs=$tmp/root/usr/bin/fabricscript
"$fs" --version | grep -q '^fabricscript ' || fails "the installed binary's --version"
cat > "$tmp/seed.fab" <<'FAB'
model Net():
    Linear(4, 4)
fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
fabric.launch()
with fabric.init_module(empty_init=True):
    model = Net()
optimizer = Adam(model.parameters(), lr=0.001)
model, optimizer = fabric.setup(model, optimizer)
FAB
"$fs" check "$tmp/seed.fab" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "meta-device parameters" "$tmp/err" || fails "the installed binary's check: $(cat "$tmp/err")"
printf 'x = 6 * 7\nprint(x)\n' > "$tmp/run.fab"
[ "$("$fs" "$tmp/run.fab")" = 42 ] || fails "the installed binary's run"
[ -f "$tmp/root/usr/share/man/man1/fabricscript.1" ] || fails "no man page"
[ -f "$tmp/root/usr/share/doc/fabricscript/architecture.md" ] || fails "no docs"
[ -f "$tmp/root/usr/share/bash-completion/completions/fabricscript" ] || fails "no bash completion"
[ $fail -eq 0 ] && echo "package-test: all passed"
exit $fail
