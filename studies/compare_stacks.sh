#!/usr/bin/env bash
# Measures two commits' software stacks side by side, as a dependency upgrade (TensorFlow, Horovod, Python)
# needs to be judged on a shared, noisy machine:
#   1. set-up from nothing: both commits' scripts/setup.sh run at the same time, each in its own clone with
#      its own empty pip and wheel caches (so each downloads and compiles everything, and both see the same
#      load); the wall time of each;
#   2. the benchmark's part 1 (hvd_dqn.measure.benchmark on one preset), the two stacks taking turns, ROUNDS times
#      each (before, after, before, after, ...).
# Debian packages are not removed first: both set-ups find the same ones installed.
#
# Usage: studies/compare_stacks.sh BEFORE_REF AFTER_REF OUT_DIR [benchmark flags...]
#   e.g. studies/compare_stacks.sh 0c35bee HEAD runs/stacks --flagfile=configs/pong.flags
# Environment: ROUNDS (default 2), PYTHON_BEFORE / PYTHON_AFTER (each set-up's PYTHON; default: its own pick).
# Writes OUT_DIR/{before,after}/ (the clones and their set-up logs), OUT_DIR/bench-<side>-<round>.json and
# OUT_DIR/summary.json, and prints the summary's table.
set -euo pipefail

if (($# < 3)); then
  echo "usage: studies/compare_stacks.sh BEFORE_REF AFTER_REF OUT_DIR [benchmark flags...]" >&2
  exit 2
fi
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
before_ref="$1" after_ref="$2" out="$3"
shift 3
bench_args=("$@")
((${#bench_args[@]})) || bench_args=(--flagfile=configs/pong.flags)
rounds="${ROUNDS:-2}"
for ref in "$before_ref" "$after_ref"; do
  git -C "$repo" rev-parse --verify --quiet "$ref^{commit}" >/dev/null || { echo "not a commit here: $ref" >&2; exit 2; }
done
[[ ! -e "$out" ]] || { echo "$out exists: give a new folder, so that no earlier measurement is overwritten" >&2; exit 2; }
mkdir -p "$out"
out="$(cd "$out" && pwd)"

log() { printf '[compare_stacks] %s\n' "$*" >&2; }

# --- 1. Set-up, both at once, from empty caches ------------------------------------------------------------
setup_side() {  # side ref python
  local side="$1" ref="$2" python="$3" dir="$out/$1"
  git clone --quiet --no-checkout "$repo" "$dir/repo"
  git -C "$dir/repo" checkout --quiet "$(git -C "$repo" rev-parse "$ref")"
  mkdir -p "$dir/cache"
  local start status=0
  start=$(date +%s)
  env PIP_CACHE_DIR="$dir/cache/pip" XDG_CACHE_HOME="$dir/cache" ${python:+PYTHON="$python"} \
    "$dir/repo/scripts/setup.sh" >"$dir/setup.log" 2>&1 || status=$?
  echo $(($(date +%s) - start)) >"$dir/setup_seconds"
  echo "$status" >"$dir/setup_status"
}
log "setting up $before_ref and $after_ref at the same time, each from empty caches (logs: $out/*/setup.log)"
setup_side before "$before_ref" "${PYTHON_BEFORE:-}" &
before_pid=$!
setup_side after "$after_ref" "${PYTHON_AFTER:-}" &
after_pid=$!
wait "$before_pid" "$after_pid" || true
for side in before after; do
  [[ "$(cat "$out/$side/setup_status")" == 0 ]] || { log "$side: set-up failed; see $out/$side/setup.log"; exit 1; }
  log "$side: set-up took $(cat "$out/$side/setup_seconds") s"
done

# --- 2. The benchmark, taking turns --------------------------------------------------------------------------
for ((round = 1; round <= rounds; round++)); do
  for side in before after; do
    log "benchmark round $round of $rounds: $side"
    # The benchmark's module: hvd_dqn/measure/ since 0.3.0, hvd_dqn/tools/ in 0.2.x, the package's top before.
    module=hvd_dqn.measure.benchmark
    [[ -f "$out/$side/repo/hvd_dqn/measure/benchmark.py" ]] || module=hvd_dqn.tools.benchmark
    [[ -f "$out/$side/repo/hvd_dqn/tools/benchmark.py" || -f "$out/$side/repo/hvd_dqn/measure/benchmark.py" ]] ||
      module=hvd_dqn.benchmark
    (cd "$out/$side/repo" && source scripts/launch_env.sh &&
      .venv/bin/python -m "$module" "${bench_args[@]}" --json="$out/bench-$side-$round.json") \
      >"$out/bench-$side-$round.log" 2>&1 || { log "$side: the benchmark failed; see $out/bench-$side-$round.log"; exit 1; }
  done
done

"$out/after/repo/.venv/bin/python" "$repo/studies/summarize_stacks.py" "$out"
