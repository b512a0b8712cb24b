#!/usr/bin/env bash
# Runs the whole test suite: sets up if needed (scripts/setup.sh), then pytest. Extra arguments go to
# pytest, e.g. `scripts/test.sh -k replay` or `scripts/test.sh tests/test_learner.py`.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup.sh"
# shellcheck source=/dev/null
source "$repo/scripts/launch_env.sh"
cd "$repo"
exec "$repo/.venv/bin/python" -m pytest "$@"
