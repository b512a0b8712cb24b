#!/usr/bin/env bash
# Measures CartPole-v1 learning with configs/cartpole.flags: for each rank count and seed, trains until the
# preset's stop rule (the last 100 training episodes average >= 475: solved, as gymnasium defines it) or
# 100k env steps, then evaluates the final checkpoint on 20 fresh episodes. Prints one line per run:
# variant, ranks, seed, env steps at the end, wall time, mean of the last 100 training episodes, and the
# independent evaluation's mean.
#   studies/cartpole_learning.sh                 # NPS="1 2" SEEDS="0"
#   NPS="2" SEEDS="0 1 2" studies/cartpole_learning.sh
#   NPS=2 SEEDS="0 1 2" VARIANTS="preset=;per=--prioritized_replay;dueling=--dueling" \
#     studies/cartpole_learning.sh              # name=extra flags, separated by ';'
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup.sh"
# shellcheck source=/dev/null
source "$repo/scripts/launch_env.sh"
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"
printf '%-14s %-6s %-5s %-10s %-8s %-9s %s\n' variant ranks seed env_steps wall_s last_100 eval_mean_return
IFS=';' read -r -a variants <<<"${VARIANTS:-preset=}"
for variant in "${variants[@]}"; do
  name="${variant%%=*}"
  read -r -a extra <<<"${variant#*=}"
  for np in ${NPS:-1 2}; do
    for seed in ${SEEDS:-0}; do
      logdir="$out/${name}_np${np}_seed${seed}"
      start=$SECONDS
      "$repo/.venv/bin/horovodrun" -np "$np" "$repo/.venv/bin/python" -m hvd_dqn.train \
        --flagfile="$repo/configs/cartpole.flags" --seed="$seed" --logdir="$logdir" "${extra[@]}" >"$logdir.log" 2>&1
      wall=$((SECONDS - start))
      "$repo/.venv/bin/python" -m hvd_dqn.evaluate --logdir="$logdir" --episodes=20 --json="$logdir.eval.json" >/dev/null
      "$repo/.venv/bin/python" - "$name" "$np" "$seed" "$wall" "$logdir" <<'PY'
import csv, json, sys
name, np_, seed, wall, logdir = sys.argv[1:]
evaluation = json.load(open(logdir + ".eval.json"))
with open(logdir + "/episodes.csv") as handle:
    last = [float(row["return"]) for row in csv.DictReader(handle)][-100:]
print(f"{name:<14} {np_:<6} {seed:<5} {evaluation['env_steps']:<10} {float(wall):<8.0f} {sum(last) / len(last):<9.1f} "
      f"{evaluation['mean_return']:.1f}")
PY
    done
  done
done
echo "logs and checkpoints: $out"
