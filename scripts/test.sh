#!/usr/bin/env bash
# Runs the whole test suite: sets up if needed (scripts/setup.sh), then pytest. Extra arguments go to
# pytest, e.g. `scripts/test.sh -k replay` or `scripts/test.sh tests/agent/test_learner.py`.
#
# Two test files at a time (pytest-xdist, one file per worker, the longest first: tests/conftest.py): most tests
# start one process that keeps a single core busy (a CartPole run is one Python thread), so on 2 cores one file at
# a time leaves a core idle; three measured no faster, every test slower by as much.
# HVD_DQN_TEST_WORKERS sets the count (0: one process, as plain pytest); `-n` among the arguments wins too.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup.sh"
# shellcheck source=/dev/null
source "$repo/scripts/launch_env.sh"
cd "$repo"
exec "$repo/.venv/bin/python" -m pytest -n "${HVD_DQN_TEST_WORKERS:-2}" --dist loadfile "$@"
