#!/usr/bin/env bash
# Trains the project's main job on this machine: sets up if needed, then
#   horovodrun -np ${NP:-1} python -m hvd_dqn.train --flagfile=configs/breakout_dopamine.flags [your flags...]
# i.e. Breakout for 1M agent steps under Dopamine's DQN protocol, the run whose curve docs/results.md
# lays over Dopamine's published one. Extra arguments are passed to hvd_dqn.train and override the
# flagfile, e.g.
#   scripts/train.sh --logdir=runs/try2 --seed=3
# Environment: NP (ranks, default 1), FLAGFILE (default configs/breakout_dopamine.flags;
# configs/cartpole.flags is the few-minute demo), HOROVODRUN_ARGS (e.g. "--mpi").
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup.sh"
# shellcheck source=/dev/null
source "$repo/scripts/launch_env.sh"
cd "$repo"
flagfile="${FLAGFILE:-configs/breakout_dopamine.flags}"
if [[ "${NP:-1}" == 1 && -z "${HOROVODRUN_ARGS:-}" ]]; then
  # One rank needs no launcher, and without one a SIGTERM (kill, Slurm, Kubernetes) reaches the trainer itself:
  # it checkpoints and exits however long the replay shard takes to write. Under horovodrun with Open MPI,
  # horovodrun replaces itself with `sh -c mpirun ...`, and a SIGTERM to that shell does not reach the rank.
  exec "$repo/.venv/bin/python" -m hvd_dqn.train --flagfile="$flagfile" "$@"
fi
# Every setting checked once, in this process, for the job's ranks: a bad one is then its one line, instead of
# every rank's failure and the launcher's report of it.
"$repo/.venv/bin/python" -m hvd_dqn.train --flagfile="$flagfile" "$@" --check_ranks="${NP:-1}" >/dev/null
# The launcher runs under setsid, out of this terminal's reach, and a stop (Ctrl-C in this terminal, SIGTERM or
# SIGHUP to this script) goes from here to the ranks themselves: through the launcher they would have seconds before
# its SIGKILL (Open MPI's mpirun: 1 s, horovodrun over Gloo: 5 s), too few to write large --checkpoint_replay
# memories. A second stop is passed on too, and the ranks then stop at once. If this script is killed outright, the
# ranks see it gone (hvd_dqn/run/launcher_watch.py) and stop with a checkpoint.
# shellcheck disable=SC2086
setsid --wait "$repo/.venv/bin/horovodrun" -np "${NP:-1}" ${HOROVODRUN_ARGS:-} \
  "$repo/.venv/bin/python" -m hvd_dqn.train --flagfile="$flagfile" "$@" &
launcher=$!
descendants() {
  local child
  for child in $(pgrep -P "$1"); do
    echo "$child"
    descendants "$child"
  done
}
stop_ranks() {
  local pid
  for pid in $(descendants "$launcher"); do
    # The ranks alone: mpirun's and the shells' command lines name hvd_dqn.train too.
    if tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qE '^\S*python\S* -m hvd_dqn\.train '; then
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done
}
trap stop_ranks INT TERM HUP
while true; do
  status=0
  wait "$launcher" || status=$?
  # A stop interrupts `wait` (status above 128) while the launcher still runs: wait on for its own end.
  kill -0 "$launcher" 2>/dev/null || break
done
exit "$status"
