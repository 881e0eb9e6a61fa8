#!/bin/sh
# differential.sh -- check agrees with run (tests/differential.py): every
# runnable regression script under tests/scripts, then random valid scripts
# over the Fabric API for FABRICSCRIPT_DIFF_SECONDS (default 20) from seed
# FABRICSCRIPT_DIFF_SEED (default 1); a disagreement fails, and a generated
# script that shows one is kept as diff-N.fab in the current directory.
src=${srcdir:-.}
exec python3 "$src/tests/differential.py" --scripts "$src/tests/scripts"
