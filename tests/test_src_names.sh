#!/usr/bin/env bash
# test_src_names.sh - every file under src/ is named by what it holds: no two
# files in different folders share a stem (the name without its extensions),
# so "backend.h" or "epilogue" never means two things. A header and its
# implementation in the same folder (st_model.h, st_model.c) are one stem.
# Usage: tests/test_src_names.sh [ignored: CTest passes the CLI's path]
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/src" || exit 1

# "stem folder" per file, one line per distinct pair; a stem on two lines
# lives in two folders
dups=$(find . -type f | sed -E 's|^\./||; s|^(.*/)?([^/.]+)(\.[^/]*)?$|\2 \1|' | sort -u |
       awk '{n[$1]++; d[$1] = d[$1] " src/" $2} END {for (s in n) if (n[s] > 1) print s ":" d[s]}' | sort)
if [ -n "$dups" ]; then
    echo "FAIL: file stems used in more than one folder under src/:" >&2
    echo "$dups" >&2
    exit 1
fi
echo "test_src_names: $(find . -type f | wc -l) files, no stem in two folders"
