"""The CPUs a process may use (`hvd_dqn.cpus`), from its affinity mask and its cgroup's CPU quota, and each rank's
share of them: measured under `taskset`, with cgroup files written by the test, and under Slurm's variables."""
import os
import subprocess
import sys

import pytest

from hvd_dqn import cpus

from conftest import REPO, environment


def _cgroup(tmp_path, files, proc_lines):
    """A fake cgroup file system under tmp_path: `files` (relative path -> text) and /proc/self/cgroup's lines."""
    root = tmp_path / "cgroup"
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    proc = tmp_path / "proc_cgroup"
    proc.write_text("\n".join(proc_lines) + "\n")
    return str(root), str(proc)


def test_a_cgroup_v2_quota_caps_the_cpus_and_max_means_none(tmp_path):
    root, proc = _cgroup(tmp_path, {"kubepods/pod1/cpu.max": "150000 100000\n"}, ["0::/kubepods/pod1"])
    assert cpus.cgroup_cpu_quota(root, proc) == 1.5
    assert cpus.usable_cpus(root, proc) == 1  # 1.5 CPUs: one thread
    root, proc = _cgroup(tmp_path / "b", {"cpu.max": "max 100000\n"}, ["0::/"])
    assert cpus.cgroup_cpu_quota(root, proc) is None
    assert cpus.usable_cpus(root, proc) == len(os.sched_getaffinity(0))


def test_a_cgroup_v1_quota_caps_the_cpus_and_minus_one_means_none(tmp_path):
    files = {"cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "100000\n", "cpu,cpuacct/docker/abc/cpu.cfs_period_us":
             "100000\n"}
    root, proc = _cgroup(tmp_path, files, ["4:memory:/docker/abc", "2:cpu,cpuacct:/docker/abc"])
    assert cpus.cgroup_cpu_quota(root, proc) == 1.0 and cpus.usable_cpus(root, proc) == 1
    files = {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}
    root, proc = _cgroup(tmp_path / "b", files, ["1:cpu:/"])
    assert cpus.cgroup_cpu_quota(root, proc) is None


def test_a_quota_of_many_cpus_is_split_over_the_ranks_of_the_host(tmp_path, monkeypatch):
    root, proc = _cgroup(tmp_path, {"cpu.max": "400000 100000\n"}, ["0::/"])
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(128)))  # a 128-core node, a 4-CPU pod
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    assert cpus.usable_cpus(root, proc) == 4
    assert [cpus.threads_per_rank(ranks, root, proc) for ranks in (1, 2, 4, 8)] == [4, 2, 1, 1]
    # A Slurm task of --cpus-per-task=8 (its own allocation, not a share of the node's), capped by the quota.
    with environment(SLURM_CPUS_PER_TASK="8", SLURM_STEP_ID="0"):
        assert cpus.threads_per_rank(4, root, proc) == 4
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
        assert cpus.threads_per_rank(4, str(tmp_path / "none"), proc) == 8


def test_threads_follow_taskset_not_the_host():
    """Under `taskset -c 0` a process may use one CPU, whatever the host has: a rank of 1 gets one thread, and so
    does the emulator pool and TensorFlow's intra-op pool hvd_dqn would start."""
    code = "from hvd_dqn import cpus; print(cpus.usable_cpus(), cpus.threads_per_rank(1))"
    taskset = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", code], capture_output=True, text=True,
                             cwd=REPO, check=True)
    assert taskset.stdout.split() == ["1", "1"]
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("this machine has one CPU: nothing to tell apart")
    free = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert int(free.stdout.split()[0]) == min(len(os.sched_getaffinity(0)),
                                              int(cpus.cgroup_cpu_quota() or len(os.sched_getaffinity(0))))
