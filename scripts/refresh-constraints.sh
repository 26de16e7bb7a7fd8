#!/usr/bin/env bash
# Pin every package the venv holds at the newest release pyproject.toml's ranges admit: a fresh venv beside the
# project's, `.[dev]` installed into it without the old pins, its `pip freeze` written to constraints.txt under the
# file's own header. Then run `make test`: the new pins land only with a green suite (make install and the images
# install exactly them).
set -euo pipefail
cd "$(dirname "$0")/.."
python="${1:-python3}"
fresh="$(mktemp -d)"
trap 'rm -rf "$fresh"' EXIT
"$python" -m venv "$fresh/venv"
"$fresh/venv/bin/python" -m pip install --quiet --upgrade pip
"$fresh/venv/bin/python" -m pip install --quiet -e '.[dev]'
{
  sed -n '/^#/p;/^#/!q' constraints.txt
  echo "pip==$("$fresh/venv/bin/python" -m pip --version | cut -d' ' -f2)"
  "$fresh/venv/bin/python" -m pip freeze --exclude-editable
} > "$fresh/constraints.txt"
diff -u constraints.txt "$fresh/constraints.txt" || true
mv "$fresh/constraints.txt" constraints.txt
echo "constraints.txt: $(grep -c '==' constraints.txt) pins; now run make test"
