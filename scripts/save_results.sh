#!/usr/bin/env bash
# Keeps a finished run's evidence in the repository: results/<name>/ gets the run's episodes.csv (every
# training episode), metrics.csv, config.json, its learning curve (curve.png) and, for an Atari game with
# Dopamine data, the per-window comparison (dopamine.md, dopamine.json, dopamine.png).
#   scripts/save_results.sh runs/breakout_dopamine breakout_dopamine
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ $# -eq 2 ]] || { echo "usage: $0 LOGDIR NAME" >&2; exit 2; }
logdir="$1" name="$2"
# NAME: a folder under results/, or one level further down for a claim with several runs (atari/pong_pqn_seed0).
[[ "$name" =~ ^[A-Za-z0-9_-][A-Za-z0-9_.-]*(/[A-Za-z0-9_-][A-Za-z0-9_.-]*)?$ ]] \
  || { echo "$0: error: NAME=$name: letters, digits, _ . - and at most one / (a folder under results/)" >&2; exit 2; }
for file in episodes.csv metrics.csv config.json; do
  [[ -f "$logdir/$file" ]] || { echo "$0: error: $logdir has no $file" >&2; exit 2; }
done
out="$repo/results/$name"
mkdir -p "$out"
cp "$logdir/episodes.csv" "$logdir/metrics.csv" "$logdir/config.json" "$out/"
python="$repo/.venv/bin/python"
"$python" -m hvd_dqn.reports.curves "$name=$out" --window=100 --out="$out/curve.png" >/dev/null
env_id="$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["env_id"])' "$out/config.json")"
if [[ "$env_id" == ALE/* ]] && "$python" -m hvd_dqn.reports.baseline "$out" --label="$name" \
    --also=Rainbow,QR-DQN,IQN --json="$out/dopamine.json" --out="$out/dopamine.png" >"$out/dopamine.md" 2>/dev/null; then
  sed -i '/^wrote /d' "$out/dopamine.md"
else
  rm -f "$out/dopamine.md"
fi
echo "saved $logdir as $out"
