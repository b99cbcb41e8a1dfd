# Sourced by the scripts: make .venv (from nothing on a fresh clone) and keep it in
# step with the requirements files. Python 3.11+ is needed; 3.13 (Lambda's) preferred.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"

pick_python() {
  local candidate
  # Lambda runs 3.13: prefer it, including pyenv installs that are not on PATH.
  for candidate in ${PYTHON:-} python3.13 "$HOME"/.pyenv/versions/3.13*/bin/python3 \
      python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3 python3.11 python3; do
    if "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' >/dev/null 2>&1; then
      echo "$candidate"; return 0
    fi
  done
  echo "error: Python 3.11 or newer is required (set PYTHON=/path/to/python3)" >&2
  return 1
}

req_hash() {
  # Only the files that exist (a missing glob match must not fail under pipefail).
  local f
  for f in "$ROOT"/requirements.txt "$ROOT"/requirements-dev.txt "$ROOT"/functions/requirements-all.txt \
      "$ROOT"/functions/*/requirements.txt "$ROOT"/examples/demo/requirements.txt; do
    if [ -f "$f" ]; then cat "$f"; fi
  done | sha256sum | cut -d' ' -f1
}

if [ ! -x "$VENV/bin/python" ]; then
  PY="$(pick_python)"
  echo "==> creating .venv with $($PY --version)" >&2
  "$PY" -m venv "$VENV"
fi
if [ "$(cat "$VENV/.requirements-hash" 2>/dev/null)" != "$(req_hash)" ]; then
  echo "==> installing requirements into .venv" >&2
  # pip's "Location ... is ignored" warnings come from this machine's pip config, not us.
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip 2>&1 | grep -v '^WARNING: Location' >&2 || true
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$ROOT/requirements-dev.txt" 2> >(grep -v '^WARNING: Location' >&2)
  req_hash > "$VENV/.requirements-hash"
fi
export PATH="$VENV/bin:$PATH"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
cd "$ROOT"
