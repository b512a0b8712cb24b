"""How many CPUs this process may use, and each rank's share of them: the default for TensorFlow's and the
emulators' thread pools.

`os.cpu_count()` counts the host's CPUs, not the process's. A Kubernetes pod limited to 4 CPUs on a 128-core node
sees 128 there, and so does a process under `taskset`, a Slurm task or a Docker `--cpus` limit; a pool of 128
threads per rank would then fight over 4 CPUs. What the process may use is the smaller of its affinity mask
(`taskset`, `mpirun --bind-to`, Slurm's task binding, a cpuset) and its cgroup's CPU quota (Kubernetes' and
Docker's CPU limits: `cpu.max` under cgroup v2, `cpu.cfs_quota_us` / `cpu.cfs_period_us` under v1).
"""
from __future__ import annotations

import math
import os
from typing import Optional

CGROUP_ROOT = "/sys/fs/cgroup"
PROC_CGROUP = "/proc/self/cgroup"


def usable_cpus(cgroup_root: str = CGROUP_ROOT, proc_cgroup: str = PROC_CGROUP) -> int:
    """The CPUs this process may run on at once: its affinity mask's, capped by its cgroup's quota (rounded down,
    at least 1)."""
    count = len(os.sched_getaffinity(0))
    quota = cgroup_cpu_quota(cgroup_root, proc_cgroup)
    if quota is not None:
        count = min(count, max(1, math.floor(quota)))
    return max(1, count)


def threads_per_rank(ranks_on_host: int, cgroup_root: str = CGROUP_ROOT, proc_cgroup: str = PROC_CGROUP) -> int:
    """One rank's share of the CPUs this process may use, split over the `ranks_on_host` ranks of its host. A
    Slurm task started with --cpus-per-task has its own allocation (SLURM_CPUS_PER_TASK), not a share of the
    node's: it gets that many, at most what its process may use."""
    usable = usable_cpus(cgroup_root, proc_cgroup)
    allocated = os.environ.get("SLURM_CPUS_PER_TASK", "")
    if allocated.isdigit() and int(allocated) > 0 and "SLURM_STEP_ID" in os.environ:
        return min(int(allocated), usable)
    return max(1, usable // max(1, ranks_on_host))


def cgroup_cpu_quota(cgroup_root: str = CGROUP_ROOT, proc_cgroup: str = PROC_CGROUP) -> Optional[float]:
    """The CPU quota of this process's cgroup in CPUs (quota / period), or None where there is none or it cannot
    be read."""
    for path in _quota_files(cgroup_root, proc_cgroup):
        try:
            with open(path) as handle:
                text = handle.read().split()
        except OSError:
            continue
        if path.endswith("cpu.max"):  # cgroup v2: "QUOTA PERIOD", or "max PERIOD" without a limit
            if len(text) == 2 and text[0] != "max":
                return int(text[0]) / int(text[1])
            return None
        try:  # cgroup v1: cpu.cfs_quota_us (-1: no limit) beside cpu.cfs_period_us
            quota = int(text[0])
            with open(path.replace("cfs_quota_us", "cfs_period_us")) as handle:
                period = int(handle.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        return quota / period if quota > 0 and period > 0 else None
    return None


def _quota_files(cgroup_root: str, proc_cgroup: str):
    """Where this process's CPU quota may be written, its own cgroup's files first, then the root's."""
    own = []
    try:
        with open(proc_cgroup) as handle:
            lines = handle.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        path = path.lstrip("/")
        if controllers == "":  # cgroup v2's unified hierarchy
            own.append(os.path.join(cgroup_root, path, "cpu.max"))
        elif "cpu" in controllers.split(","):
            for folder in (controllers, "cpu", "cpu,cpuacct"):
                own.append(os.path.join(cgroup_root, folder, path, "cpu.cfs_quota_us"))
    fallback = [os.path.join(cgroup_root, "cpu.max"), os.path.join(cgroup_root, "cpu", "cpu.cfs_quota_us"),
                os.path.join(cgroup_root, "cpu,cpuacct", "cpu.cfs_quota_us")]
    return list(dict.fromkeys(own + fallback))
