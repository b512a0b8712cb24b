#!/usr/bin/env bash
# The benchmark in both of its parts, into one JSON file:
#   1. one process: the pipeline's stages side by side (emulators, acting, update vs plain Keras, sampling vs
#      a bare gather, full training with and without overlap);
#   2. two ranks under horovodrun: the gradient allreduce per update, against the ring formula's prediction.
# Usage: scripts/benchmark.sh [--flagfile=configs/pong.flags] [--json=bench.json] [more benchmark flags]
# Environment: NP (ranks for part 2, default 2).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup.sh"
# shellcheck source=/dev/null
source "$repo/scripts/launch_env.sh"
cd "$repo"
args=("$@")
[[ " ${args[*]} " == *" --flagfile="* ]] || args=(--flagfile=configs/pong.flags "${args[@]}")
[[ " ${args[*]} " == *" --json="* ]] || args+=(--json=bench.json)
"$repo/.venv/bin/python" -m hvd_dqn.measure.benchmark "${args[@]}"
"$repo/.venv/bin/horovodrun" -np "${NP:-2}" --gloo "$repo/.venv/bin/python" -m hvd_dqn.measure.benchmark "${args[@]}"
