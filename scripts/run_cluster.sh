#!/usr/bin/env bash
# Launches hvd_dqn training across several hosts with the cluster's own engine: horovodrun (Gloo or MPI)
# or plain mpirun. A thin wrapper: it checks the hosts, prints the exact command, then runs it.
#
#   scripts/run_cluster.sh -H host1:4,host2:4 [options] -- [hvd_dqn.train flags]
#
# Options (before --):
#   -H, --hosts LIST        hosts and slots (ranks) per host, e.g. node1:4,node2:4 (required)
#   -np N                   ranks in total (default: the sum of the slots)
#   --launcher L            horovodrun-gloo (default), horovodrun-mpi, or mpirun
#   --ssh-port P            sshd port on the hosts (default 22)
#   --ssh-identity-file F   private key for password-less ssh
#   --network-interface I   NIC the ranks talk over (e.g. eth0, ib0; lo for loopback tests)
#   --check-only            run the checks and print the command, do not launch
#   --skip-checks           launch without the checks
#
# Before a long run, the checks verify on every host: password-less ssh (no prompt can block a launch),
# the same repository path at the same git commit, the same venv python able to import hvd_dqn and
# Horovod, and whether --logdir is shared: rank 0 (the first slot of the first host) alone writes
# checkpoints, metrics and TensorBoard events there; no other rank writes to it, so a per-host (not shared)
# logdir is fine, but then everything is on the first host, and --resume must run with it first again.
#
# The mpirun line follows Horovod's documentation: one process per slot (-map-by slot), no core binding
# (-bind-to none: each rank runs its own TensorFlow thread pool and emulators), TCP transport (-mca pml ob1
# -mca btl ^openib), and the environment each rank needs exported with -x.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="$repo/.venv/bin/python"
hosts="" np="" launcher="horovodrun-gloo" ssh_port="" identity="" nic="" check_only=0 skip_checks=0
die() { printf 'run_cluster.sh: error: %s\n' "$*" >&2; exit 2; }

while (($#)); do
  case "$1" in
    -H|--hosts) hosts="${2:?}"; shift 2 ;;
    -np) np="${2:?}"; shift 2 ;;
    --launcher) launcher="${2:?}"; shift 2 ;;
    --ssh-port) ssh_port="${2:?}"; shift 2 ;;
    --ssh-identity-file) identity="${2:?}"; shift 2 ;;
    --network-interface) nic="${2:?}"; shift 2 ;;
    --check-only) check_only=1; shift ;;
    --skip-checks) skip_checks=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) die "unknown option $1 (training flags go after --; see --help)" ;;
  esac
done
train_flags=("$@")

[[ -n "$hosts" ]] || die "-H host1:slots,host2:slots is required"
[[ "$hosts" =~ ^([^,:]+:[0-9]+)(,[^,:]+:[0-9]+)*$ ]] || die "-H $hosts: expected host:slots[,host:slots...], e.g. node1:4,node2:4"
slots=0; host_names=()
IFS=',' read -r -a entries <<<"$hosts"
for entry in "${entries[@]}"; do host_names+=("${entry%%:*}"); slots=$((slots + ${entry##*:})); done
np="${np:-$slots}"
[[ "$np" =~ ^[1-9][0-9]*$ ]] || die "-np $np: must be a positive integer"
((np <= slots)) || die "-np $np: more ranks than the $slots slots in -H $hosts"
[[ -x "$python" ]] || die "no venv at $repo/.venv: run scripts/setup.sh on every host first"

ssh_options=(-o BatchMode=yes -o ConnectTimeout=10)
[[ -n "$ssh_port" ]] && ssh_options+=(-p "$ssh_port")
[[ -n "$identity" ]] && ssh_options+=(-i "$identity")

logdir=""
for flag in "${train_flags[@]}"; do [[ "$flag" == --logdir=* ]] && logdir="${flag#--logdir=}"; done

preflight() {
  local commit; commit="$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)"
  local probe=""
  if [[ -n "$logdir" ]]; then
    mkdir -p "$logdir"; probe="$logdir/.shared_probe_$$"; : >"$probe"
  fi
  local failed=0 host answer
  for host in "${host_names[@]}"; do
    # One ssh call per host; BatchMode makes a host that would ask for a password fail at once.
    if ! answer="$(ssh "${ssh_options[@]}" "$host" "
        cd '$repo' 2>/dev/null || { echo 'NO_REPO'; exit 0; }
        echo \"COMMIT \$(git rev-parse HEAD 2>/dev/null || echo unknown)\"
        '$python' -c 'import hvd_dqn, horovod.tensorflow' >/dev/null 2>&1 && echo VENV_OK || echo VENV_BAD
        [ -n '$probe' ] && [ -e '$probe' ] && echo LOGDIR_SHARED
        true" 2>&1)"; then
      echo "  $host: ssh failed: ${answer##*$'\n'}"
      local connect="${ssh_port:+-p $ssh_port }${identity:+-i $identity }$host"
      echo "    fix: password-less ssh (ssh-copy-id ${connect}), and accept its host key once: ssh ${connect} true"
      failed=1; continue
    fi
    if [[ "$answer" == *NO_REPO* ]]; then
      echo "  $host: no $repo; the code and venv must be at the same path on every host"; failed=1; continue
    fi
    local remote_commit; remote_commit="$(sed -n 's/^COMMIT //p' <<<"$answer")"
    if [[ "$remote_commit" != "$commit" ]]; then
      echo "  $host: git commit $remote_commit differs from this host's $commit"; failed=1
    fi
    if [[ "$answer" != *VENV_OK* ]]; then
      echo "  $host: $python cannot import hvd_dqn and horovod; run scripts/setup.sh there"; failed=1
    fi
    if [[ -n "$probe" && "$answer" != *LOGDIR_SHARED* ]]; then
      echo "  $host: --logdir=$logdir is not shared with this host (fine: only rank 0, on ${host_names[0]}, writes it)"
    fi
    [[ $failed -eq 0 ]] && echo "  $host: ok (commit ${remote_commit:0:12}, venv imports hvd_dqn and Horovod)"
  done
  [[ -n "$probe" ]] && rm -f "$probe"
  return $failed
}

# shellcheck source=/dev/null
source "$repo/scripts/launch_env.sh"
case "$launcher" in
  horovodrun-gloo|horovodrun-mpi)
    command=("$repo/.venv/bin/horovodrun" -np "$np" -H "$hosts")
    [[ "$launcher" == horovodrun-gloo ]] && command+=(--gloo) || command+=(--mpi)
    [[ -n "$ssh_port" ]] && command+=(--ssh-port "$ssh_port")
    [[ -n "$identity" ]] && command+=(--ssh-identity-file "$identity")
    [[ -n "$nic" ]] && command+=(--network-interface "$nic")
    [[ "$launcher" == horovodrun-mpi && $(id -u) -eq 0 ]] && command+=("--mpi-args=--allow-run-as-root")
    ;;
  mpirun)
    command=(mpirun -np "$np" -H "$hosts" -bind-to none -map-by slot -mca pml ob1 -mca btl ^openib
             -x PATH -x TF_CPP_MIN_LOG_LEVEL -x TF_USE_LEGACY_KERAS)
    for variable in $(compgen -e | grep -E '^(HOROVOD_|NCCL_)|^LD_LIBRARY_PATH$' || true); do
      command+=(-x "$variable")
    done
    rsh_args="${ssh_options[*]}"
    command+=(-mca plm_rsh_args "$rsh_args")
    [[ -n "$nic" ]] && command+=(-mca btl_tcp_if_include "$nic" -mca oob_tcp_if_include "$nic")
    [[ $(id -u) -eq 0 ]] && command+=(--allow-run-as-root)
    ;;
  *) die "--launcher $launcher: expected horovodrun-gloo, horovodrun-mpi or mpirun" ;;
esac
command+=("$python" -m hvd_dqn.train "${train_flags[@]}")

if [[ $skip_checks -eq 0 ]]; then
  echo "checking ${#host_names[@]} host(s):"
  preflight || die "a host failed the checks above; fix it, or pass --skip-checks to launch anyway"
fi
printf 'command:'; printf ' %q' "${command[@]}"; printf '\n'
[[ $check_only -eq 1 ]] && exit 0
cd "$repo"
exec "${command[@]}"
