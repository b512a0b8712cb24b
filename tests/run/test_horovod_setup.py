"""--cores_per_rank: which cores a rank takes, that every thread of the process is bound to them, and what
the log says; one worker per core is how worker-for-worker speed-ups are measured."""
import os
import subprocess
import sys

import pytest

from conftest import PYTHON, REPO, horovodrun, python_module, run, subprocess_env
from hvd_dqn.run.horovod_setup import BindingError, cores_for_rank, runtime_defaults

AVAILABLE = sorted(os.sched_getaffinity(0))


@pytest.mark.parametrize("available, local_rank, local_size, cores_per_rank, expected", [
    ([0, 1, 2, 3], 0, 2, 1, [0]),
    ([0, 1, 2, 3], 1, 2, 1, [1]),
    ([0, 1, 2, 3], 1, 2, 2, [2, 3]),
    ([4, 6, 5, 7], 1, 2, 2, [6, 7]),  # a cpuset's cores, in order
    ([3], 1, 2, 1, [3]),  # already bound by the launcher (mpirun --bind-to core): kept
])
def test_each_local_rank_takes_its_own_block_of_cores(available, local_rank, local_size, cores_per_rank, expected):
    assert cores_for_rank(available, local_rank, local_size, cores_per_rank) == expected


def test_too_few_cores_for_the_ranks_of_a_host_is_named():
    with pytest.raises(BindingError, match=r"^--cores_per_rank=2: 2 rank\(s\) on this host need 4 cores, but this "
                                           r"process may use 3 \(0,1,2\); use fewer ranks per host or fewer cores per "
                                           r"rank$"):
        cores_for_rank([0, 1, 2], 1, 2, 2)


def test_binding_reaches_the_threads_already_running_and_those_started_later():
    code = ("import os, threading, time\n"
            "from hvd_dqn.run.horovod_setup import bind_to_cores, cores_text\n"
            "ready, done = threading.Event(), threading.Event()\n"
            "def work(): ready.set(); done.wait()\n"
            "early = threading.Thread(target=work); early.start(); ready.wait()\n"
            f"bind_to_cores([{AVAILABLE[-1]}])\n"
            "late = threading.Thread(target=lambda: print(sorted(os.sched_getaffinity(0)))); late.start(); late.join()\n"
            "print(sorted(os.sched_getaffinity(early.native_id)), cores_text())\n"
            "done.set()\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            env=subprocess_env(), cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"[{AVAILABLE[-1]}]", f"[{AVAILABLE[-1]}] {AVAILABLE[-1]}"]


@pytest.mark.skipif(len(AVAILABLE) < 2, reason="two ranks of one core each need two cores")
def test_two_ranks_each_bound_to_a_core_of_their_own_train_and_say_so(tmp_path, monkeypatch):
    monkeypatch.delenv("HOROVOD_CYCLE_TIME", raising=False)  # the suite's own 1 ms (tests/conftest.py): the default here
    result = horovodrun(2, [PYTHON, "-m", "hvd_dqn.train", f"--flagfile={REPO / 'configs' / 'cartpole.flags'}",
                            f"--logdir={tmp_path}", "--total_env_steps=1600", "--cores_per_rank=1"], timeout=300)
    output = result.stdout + result.stderr
    assert (f"cores: rank 0 on {AVAILABLE[0]} (1 TensorFlow thread); rank 1 on {AVAILABLE[1]} (1 TensorFlow "
            "thread)") in output, output[-3000:]
    # Two ranks on one host, no cycle set by the user: the ranks run without a cycle.
    assert "2 ranks on 1 host(s), controller Gloo, Horovod cycle 0 ms" in output, output[-3000:]
    assert (tmp_path / "checkpoints" / "ckpt-000000001600" / "COMPLETE").exists()


def test_more_cores_than_the_host_has_is_one_line(tmp_path):
    wanted = len(AVAILABLE) + 1
    result = python_module("hvd_dqn.train", [f"--logdir={tmp_path}", f"--cores_per_rank={wanted}"], timeout=120,
                           check=False)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"hvd_dqn.train: error: --cores_per_rank={wanted}: 1 rank(s) on this host need {wanted} cores, but this "
        f"process may use {len(AVAILABLE)} ({','.join(map(str, AVAILABLE))}); use fewer ranks per host or fewer "
        "cores per rank"]


@pytest.mark.parametrize("world_size, local_size, cycle_ms", [
    (1, 1, "2"),  # alone: a 0 cycle would spin on the rank's core
    (2, 2, "0"), (8, None, "0"),  # one host (or a launcher that does not say): the allreduce starts at once
    (8, 4, "2"),  # several hosts: not measured, the coordination rounds would cross the network
])
def test_the_horovod_cycle_follows_the_ranks_and_hosts(world_size, local_size, cycle_ms):
    defaults = runtime_defaults(world_size, local_size)
    assert defaults == {"HOROVOD_CYCLE_TIME": cycle_ms, "OMPI_MCA_mpi_yield_when_idle": "1"}


@pytest.mark.skipif(len(AVAILABLE) < 2, reason="one CPU under taskset must be fewer than the machine's")
def test_a_rank_under_taskset_starts_one_thread_per_cpu_it_may_use(tmp_path):
    """`taskset -c C` leaves the rank one CPU of the machine's: TensorFlow's pool follows the CPU, not the host."""
    result = run(["taskset", "-c", str(AVAILABLE[-1]), PYTHON, "-m", "hvd_dqn.train",
                  f"--flagfile={REPO / 'configs' / 'cartpole.flags'}", f"--logdir={tmp_path}", "--total_env_steps=400"],
                 timeout=300)
    output = result.stdout + result.stderr
    assert f"cores: rank 0 on {AVAILABLE[-1]} (1 TensorFlow thread)" in output, output[-3000:]
