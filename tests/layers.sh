#!/bin/sh
# layers.sh -- make check's run of scripts/layers: the include graph follows
# the layers of docs/architecture.md (and the check itself can fail).
top=${srcdir:-.}
"$top/scripts/layers" --self-test && "$top/scripts/layers" "$top"
