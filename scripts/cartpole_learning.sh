#!/usr/bin/env bash
# Measures CartPole-v1 learning with configs/cartpole.flags: for each rank count and seed, trains until the
# preset's evaluation target (or 100k env steps), then evaluates the final checkpoint on 20 fresh episodes.
# Prints one line per run: ranks, seed, env steps at the end, wall time, independent evaluation mean.
#   scripts/cartpole_learning.sh                 # NPS="1 2" SEEDS="0"
#   NPS="2" SEEDS="0 1 2" scripts/cartpole_learning.sh
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup.sh"
# shellcheck source=/dev/null
source "$repo/scripts/launch_env.sh"
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"
printf '%-6s %-5s %-10s %-8s %s\n' ranks seed env_steps wall_s eval_mean_return
for np in ${NPS:-1 2}; do
  for seed in ${SEEDS:-0}; do
    logdir="$out/np${np}_seed${seed}"
    start=$SECONDS
    "$repo/.venv/bin/horovodrun" -np "$np" "$repo/.venv/bin/python" -m hvd_dqn.train \
      --flagfile="$repo/configs/cartpole.flags" --seed="$seed" --logdir="$logdir" >"$logdir.log" 2>&1
    wall=$((SECONDS - start))
    "$repo/.venv/bin/python" -m hvd_dqn.evaluate --logdir="$logdir" --episodes=20 --json="$logdir.eval.json" >/dev/null
    "$repo/.venv/bin/python" - "$np" "$seed" "$wall" "$logdir" <<'PY'
import json, sys
np_, seed, wall, logdir = sys.argv[1:]
evaluation = json.load(open(logdir + ".eval.json"))
print(f"{np_:<6} {seed:<5} {evaluation['env_steps']:<10} {float(wall):<8.0f} {evaluation['mean_return']:.1f}")
PY
  done
done
echo "logs and checkpoints: $out"
