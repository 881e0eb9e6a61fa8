#!/bin/sh
# data-test.sh -- the regression scripts that read data files (tests/data/scripts):
# NumPy, token, CSV and image files, good and broken (tests/data/files, made by
# numpy and tests/data/mkimages.c). They name their files relative to
# tests/data, so they run from there.
fs=${FABRICSCRIPT:-./fabricscript}
case $fs in /*) ;; *) fs=$(pwd)/$fs ;; esac
cd "${srcdir:-.}/tests/data" || exit 1
exec "$fs" test scripts
