#!/usr/bin/env bash
# test_consumers_venv.sh - the key of the consumer tests' venv
# (scripts/consumers_venv.sh), with stand-in interpreters that only report a
# version (no venv is made, nothing is downloaded):
#  - the key is the same for Python 3.12.1 and 3.12.3, and differs for 3.13.0;
#  - it changes when a pin or the recipe changes;
#  - a venv made under 3.12.1 (its stamp naming the patch release, as older
#    stamps did) is reused under 3.12.3, and is not after a pin changed.
# Usage: tests/test_consumers_venv.sh [ignored: CTest passes the CLI's path]
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# a python3 that reports version $1 and can do nothing else (no venv module)
fake_python() {
    mkdir -p "$tmp/py$1"
    cat >"$tmp/py$1/python3" <<EOS
#!/bin/sh
case "\$*" in *version_info*) echo $1; exit 0 ;; esac
exit 1
EOS
    chmod +x "$tmp/py$1/python3"
    echo "$tmp/py$1/python3"
}
# run the script ($1) with the interpreter of version $2; the rest are its arguments
venv_script() {
    local script=$1 ver=$2
    shift 2
    env -u FP8KIT_CONSUMERS_FORCE FP8KIT_PYTHON="$(fake_python "$ver")" FP8KIT_CONSUMERS_VENV="$tmp/venv" \
        FP8KIT_NO_APT=1 bash "$script" "$@" 2>>"$tmp/stderr.log"
}
key() { venv_script "$1" "$2" --key; }

script=$src/scripts/consumers_venv.sh
k1=$(key "$script" 3.12.1) && k3=$(key "$script" 3.12.3) || fail "--key failed: $(tail -3 "$tmp/stderr.log")"
[ -n "$k1" ] && [ "$(printf '%s\n' "$k1" | wc -l)" = 1 ] || fail "--key printed '$k1', not one line"
printf '%s\n' "$k1" | grep -q 'transformers==' || fail "the key does not hold the pins: $k1"
[ "$k1" = "$k3" ] || fail "Python 3.12.1 and 3.12.3 give other keys: '$k1' / '$k3'"
[ "$(key "$script" 3.13.0)" != "$k1" ] || fail "Python 3.13.0 gives 3.12's key"
echo "ok: one key for 3.12.1 and 3.12.3, another for 3.13.0: $k1"

pin=$(grep -oE '"transformers==[0-9.]+"' "$script" | head -1)
[ -n "$pin" ] || fail "no transformers pin in $script"
sed "s/$pin/\"transformers==0.0.1\"/" "$script" >"$tmp/pin.sh"
sed -E 's/^RECIPE=([0-9]+)/RECIPE=9\1/' "$script" >"$tmp/recipe.sh"
cmp -s "$script" "$tmp/pin.sh" && fail "could not change the pin"
cmp -s "$script" "$tmp/recipe.sh" && fail "could not change the recipe"
[ "$(key "$tmp/pin.sh" 3.12.1)" != "$k1" ] || fail "a changed pin keeps the key"
[ "$(key "$tmp/recipe.sh" 3.12.1)" != "$k1" ] || fail "a changed recipe keeps the key"
echo "ok: a changed pin or recipe changes the key"

# a venv made under 3.12.1 whose loaders import (a stand-in python that succeeds)
mkdir -p "$tmp/venv/bin"
printf '#!/bin/sh\nexit 0\n' >"$tmp/venv/bin/python"
chmod +x "$tmp/venv/bin/python"
printf '%s\n' "$k1" | sed -E 's/ python=([0-9]+\.[0-9]+) / python=\1.1 /' >"$tmp/venv/.fp8kit-consumers-stamp"
grep -q ' python=3\.12\.1 ' "$tmp/venv/.fp8kit-consumers-stamp" || fail "could not write a 3.12.1 stamp"
out=$(venv_script "$script" 3.12.3) || fail "the 3.12.1 venv under 3.12.3: exit $? ($(tail -3 "$tmp/stderr.log"))"
[ "$out" = "$tmp/venv/bin/python" ] || fail "the 3.12.1 venv was not reused under 3.12.3: '$out'"
out=$(venv_script "$tmp/pin.sh" 3.12.3)
rc=$?
# not reused: it goes on to make a venv, which the stand-in interpreter cannot (77)
[ $rc = 77 ] && [ -z "$out" ] || fail "the venv was reused after a pin changed (exit $rc, '$out')"
[ -x "$tmp/venv/bin/python" ] || fail "the venv was removed before a new one could be made"
echo "ok: the 3.12.1 venv is reused under 3.12.3, and not after a pin changed"
echo "test_consumers_venv: all passed"
