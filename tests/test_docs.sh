#!/usr/bin/env bash
# test_docs.sh - the repository documents itself (issue 19): no file points
# to the team's ../shared folder (or to SPEC.md / PERF.md / DESIGN.md outside
# docs/), every relative link in README.md, docs/*.md and python/README.md
# names a file or directory that exists, and LICENSE is there.
# Usage: tests/test_docs.sh [ignored: CTest passes the CLI's path]
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 1
fail=0
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

[ -f LICENSE ] && grep -q "MIT License" LICENSE || bad "LICENSE (MIT) missing"
grep -q "MIT" README.md || bad "README does not state the license"

# files of the repository (git ls-files when this is a clone, else a walk)
if git -C "$root" rev-parse >/dev/null 2>&1; then
    files=$(git -C "$root" ls-files | grep -v '^bench/results/')
else
    files=$(find . -type f -not -path './.git/*' -not -path './build*' -not -path './bench/results/*' | sed 's|^\./||')
fi
for f in $files; do
    case "$f" in tests/test_docs.sh | tests/test_cli.sh | tests/test_st_cli.py) continue ;; esac
    [ -f "$f" ] || continue
    if grep -nE '\.\./shared|shared/(SPEC|PERF|DESIGN)\.md|(^|[^/a-z_])(SPEC|PERF|DESIGN)\.md' "$f" >/tmp/fk_docs_hits.$$ 2>/dev/null; then
        bad "$f points outside the repository: $(head -3 /tmp/fk_docs_hits.$$ | tr '\n' ' ')"
    fi
done
rm -f /tmp/fk_docs_hits.$$

# relative links [text](path#anchor) in the docs resolve
for md in README.md docs/*.md python/README.md tests/consumers/FORMATS.md; do
    [ -f "$md" ] || continue
    dir=$(dirname "$md")
    grep -oE '\]\([^)#]+(#[^)]*)?\)' "$md" | sed -E 's/^\]\(//; s/\)$//; s/#.*//' | while read -r link; do
        case "$link" in http://* | https://* | mailto:* | "") continue ;; esac
        [ -e "$dir/$link" ] || echo "$md: broken link '$link'"
    done
done >/tmp/fk_links.$$
if [ -s /tmp/fk_links.$$ ]; then
    while read -r l; do bad "$l"; done </tmp/fk_links.$$
fi
rm -f /tmp/fk_links.$$

echo "test_docs: $fail failed"
[ "$fail" = 0 ]
