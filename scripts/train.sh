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
# shellcheck disable=SC2086
exec "$repo/.venv/bin/horovodrun" -np "${NP:-1}" ${HOROVODRUN_ARGS:-} \
  "$repo/.venv/bin/python" -m hvd_dqn.train --flagfile="$flagfile" "$@"
