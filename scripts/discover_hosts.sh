#!/usr/bin/env bash
# Host discovery for Horovod Elastic (`horovodrun --host-discovery-script scripts/discover_hosts.sh`).
# horovodrun runs it every few seconds; it prints the hosts that can take workers now, one `host:slots`
# per line. A host that disappears from the list has its workers stopped; a new one gets workers, up to
# --max-np. Sources, the first that exists:
#   1. the file named by HVD_DQN_HOSTS_FILE (default: hosts.txt in the repository), one `host:slots` a line,
#      `#` comments allowed: edit it while the job runs to add or retire machines;
#   2. inside a Slurm allocation, its nodes (scontrol), each with HVD_DQN_SLOTS slots (default 1).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
hosts_file="${HVD_DQN_HOSTS_FILE:-$repo/hosts.txt}"

if [[ -f "$hosts_file" ]]; then
  # Drop comments and blank lines; keep `host:slots` lines as they are.
  sed -e 's/#.*//' -e 's/[[:space:]]//g' "$hosts_file" | grep -v '^$' || true
elif [[ -n "${SLURM_JOB_NODELIST:-}" ]] && command -v scontrol >/dev/null 2>&1; then
  scontrol show hostnames "$SLURM_JOB_NODELIST" | sed "s/\$/:${HVD_DQN_SLOTS:-1}/"
else
  echo "discover_hosts.sh: no hosts file at $hosts_file (set HVD_DQN_HOSTS_FILE) and no Slurm allocation" >&2
  exit 1
fi
