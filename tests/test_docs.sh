#!/usr/bin/env bash
# test_docs.sh - the repository documents itself: no file points to the
# team's ../shared folder (or to SPEC.md / PERF.md / DESIGN.md outside docs/),
# every relative link in README.md, docs/*.md and python/README.md names a
# file or directory that exists, the docs cite no issue numbers ("issue 21",
# "issue-6", "#23") or branches, every repository path they name (src/...,
# tests/..., `python/tests/test_abi.py`) exists, and LICENSE is there.
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

# The docs stand alone: a clone has no issue tracker or development branches,
# so a target or a change is described, not cited by number or branch.
mds=(README.md docs/*.md python/README.md tests/consumers/FORMATS.md)
for md in "${mds[@]}"; do
    [ -f "$md" ] || continue
    grep -nE -i '(^|[^a-z])issues?[ -]?#?[0-9]+|(^|[[:space:]([])#[0-9]+([^-0-9a-z]|$)|\(branch([[:space:]]|$)|\bon branch\b' \
        "$md" | head -5 | while read -r l; do echo "$md:$l"; done
done >/tmp/fk_cite.$$
if [ -s /tmp/fk_cite.$$ ]; then
    while read -r l; do bad "cites an issue or branch: $l"; done </tmp/fk_cite.$$
fi
rm -f /tmp/fk_cite.$$

# Repository paths named in the docs (src/..., tests/..., in backticks or not;
# patterns with * { < are skipped) exist. A path inside a longer one (a link's
# ../bench/..., a URL) is left to the link check.
for md in "${mds[@]}"; do
    [ -f "$md" ] || continue
    grep -oE '(^|[^A-Za-z0-9_./-])(src|tests|docs|bench|python|scripts|tools|include|examples)/[A-Za-z0-9_./*{}<>-]*' \
        "$md" | sed -E 's/^[^a-z]//' | while read -r p; do
        p=${p%.}
        case "$p" in *'*'* | *'{'* | *'<'*) continue ;; esac
        [ -e "$p" ] || echo "$md: '$p' does not exist"
    done
done | sort -u >/tmp/fk_paths.$$
if [ -s /tmp/fk_paths.$$ ]; then
    while read -r l; do bad "$l"; done </tmp/fk_paths.$$
fi
rm -f /tmp/fk_paths.$$

echo "test_docs: $fail failed"
[ "$fail" = 0 ]
