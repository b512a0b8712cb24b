"""python -m hvd_dqn.ray_train against a real Ray head: `ray start --head` on 127.0.0.1, started and stopped by
these tests, with token authentication. Two Ray workers train CartPole with identical replicas, rank 0 alone
writes, and the checkpoint evaluates; bad flags and a killed worker are one line; a signal to the driver stops
every worker with a checkpoint."""
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from hvd_dqn.logdir import checkpoint

from conftest import REPO, environment, python_module, run, subprocess_env

RAY = str(pathlib.Path(sys.executable).parent / "ray")
TRAIN = [f"--flagfile={REPO / 'configs' / 'cartpole.flags'}", "--num_workers=2", "--eval_interval_env_steps=0",
         "--log_interval_env_steps=1000", "--stop_at_train_return=inf"]
# One node here: Horovod's elastic driver would look for network interfaces common to 2 nodes.
# hvd_dqn.ray_train.STOP_BOUND_S (60 s for the workers' last steps and checkpoint) and Ray's shutdown (importing
# the module here would define hvd_dqn.train's flags a second time in this process).
STOP_BOUND_S = 90
ELASTIC = ["--elastic", "--rank_scaling=batch", "--network_interface=lo", "--elastic_commit_env_steps=1000"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    """A Ray head on 127.0.0.1 with 2 CPUs. The variables this process sets (and so every subprocess the
    tests start inherits) keep Ray on loopback and give driver and head the same authentication token."""
    port = _free_port()
    with environment(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=uuid.uuid4().hex,
                     RAY_USAGE_STATS_ENABLED="0"):
        try:
            started = subprocess.run([RAY, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
                                      "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats"],
                                     capture_output=True, text=True, timeout=120, env=subprocess_env())
            if started.returncode != 0:
                pytest.fail(f"ray start failed:\n{started.stdout[-3000:]}\n{started.stderr[-3000:]}")
            yield f"127.0.0.1:{port}"
        finally:
            subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=120, env=subprocess_env())


def test_two_ray_workers_train_with_equal_replicas_and_the_checkpoint_evaluates(ray_head, tmp_path):
    logdir = tmp_path / "run"
    result = python_module("hvd_dqn.ray_train", [*TRAIN, f"--ray_address={ray_head}", f"--logdir={logdir}",
                                                 "--total_env_steps=3000", "--checkpoint_interval_env_steps=1500"],
                           timeout=600)
    # Each rank's memory holds its 500 of the job's 1,000 transitions after 1,000 env steps; from then on each
    # makes one update per 2 of its own env steps (4 envs: 2 per iteration of 8 job env steps), 251 iterations.
    _assert_two_workers_trained_in_step(result, logdir, env_steps=3000, updates=502)
    assert "rank 0 (local rank 0" in result.stderr and "rank 1 (local rank 1" in result.stderr
    # Rank 0 alone writes: one TensorBoard event file (each writer names its own by host and pid), beside the
    # logs, whatever the number of workers.
    files = sorted(path.name for path in logdir.iterdir() if path.is_file())
    assert [name for name in files if not name.startswith("events.out.tfevents.")] == [
        "config.json", "episodes.csv", "metrics.csv"]
    assert len(files) == 4
    _assert_the_checkpoint_evaluates(logdir, tmp_path, env_steps=3000)


def _assert_two_workers_trained_in_step(result, logdir, env_steps: int, updates: int) -> None:
    """The driver's last line sums the run up; its checkpoint holds the counts and two equal replicas."""
    assert result.stdout.strip().splitlines()[-1] == (
        f"hvd_dqn.ray_train: trained {env_steps:,} env steps, {updates:,} updates, {_episodes(logdir)} episodes on "
        f"2 Ray workers; logdir {logdir}")
    saved = checkpoint.read_counters(checkpoint.latest_checkpoint(str(logdir)))
    assert saved["env_steps"] == env_steps and saved["world_size"] == 2
    assert len(set(saved["replica_weight_digests"])) == 1  # the allreduce kept the replicas bitwise equal


def _assert_the_checkpoint_evaluates(logdir, tmp_path, env_steps: int) -> None:
    report = tmp_path / "eval.json"
    python_module("hvd_dqn.evaluate", [f"--logdir={logdir}", "--episodes=4", f"--json={report}"], timeout=300)
    assert json.loads(report.read_text())["env_steps"] == env_steps


def _episodes(logdir) -> str:
    rows = (logdir / "episodes.csv").read_text().strip().splitlines()[1:]
    return f"{len(rows):,}"


@pytest.mark.parametrize("arguments, message", [
    (["--num_workers=0"], "--num_workers=0: must be a positive integer"),
    (["--batch_size=0"], "--batch_size=0: must be a positive integer"),
    (["--elastic", "--rank_scaling=batch", "--min_workers=3"], "--min_workers=3: more than --num_workers=2"),
    (["--elastic", "--rank_scaling=batch", "--ray_address=ray://127.0.0.1:1"],
     "--elastic: not available through Ray Client"),
    (["--ray_address=127.0.0.1:1"], "--ray_address=127.0.0.1:1: cannot join a Ray cluster there"),
])
def test_bad_flags_are_one_line(tmp_path, arguments, message):
    result = python_module("hvd_dqn.ray_train", [*TRAIN, f"--logdir={tmp_path / 'run'}", *arguments], timeout=120,
                           check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1].startswith(f"hvd_dqn.ray_train: error: {message}"), \
        result.stderr[-3000:]


def test_elastic_workers_train_with_equal_replicas_and_the_checkpoint_evaluates(ray_head, tmp_path):
    """--elastic runs on horovod.ray's elastic executor (Horovod's elastic driver, Ray's node discovery) with
    hvd_dqn's elastic state: both workers commit and train in step to the end."""
    logdir = tmp_path / "run"
    result = python_module("hvd_dqn.ray_train", [*TRAIN, *ELASTIC, f"--ray_address={ray_head}", f"--logdir={logdir}",
                                                 "--total_env_steps=3200"], timeout=600)
    _assert_two_workers_trained_in_step(result, logdir, env_steps=3200, updates=_updates_in_batch_mode(3200))
    assert "world: 2 ranks" in result.stderr and "elastic commit at 2,000 env steps" in result.stderr
    _assert_the_checkpoint_evaluates(logdir, tmp_path, env_steps=3200)


def _updates_in_batch_mode(env_steps: int) -> int:
    """--rank_scaling=batch: each of the 2 ranks makes one update per --train_frequency=2 of its own env steps
    once its memory holds --learning_starts=1000, i.e. one update per 4 env steps of the job from 2,000 on; the
    job's loop steps 8 envs per rank (16 env steps) per iteration, making 4 updates where it crosses 2,000 (so
    totals that are multiples of 16 come out exact)."""
    return 4 + (env_steps - 2000) // 4


# In a process of its own: importing hvd_dqn.ray_train defines hvd_dqn.train's flags.
PATIENT_FIRST_ANSWER = """
import inspect
import horovod.ray.elastic_v2 as elastic_v2
from hvd_dqn.ray_train import FIRST_ANSWER_S, HOROVOD_FIRST_ANSWER_S, _patient_first_answer

# The wait it lengthens is still Horovod's: a release that changes it fails here, not in a user's job.
assert f"ray.get(ping, timeout={HOROVOD_FIRST_ANSWER_S})" in inspect.getsource(elastic_v2), "Horovod's ping changed"

class Ray:  # records the timeouts it is asked for
    waits = []
    exceptions = object()

    def get(self, refs, timeout=None):
        self.waits.append(timeout)
        return refs

ray = Ray()
elastic_v2.ray = "unpatched"
_patient_first_answer(ray)
_patient_first_answer(ray)  # twice is once
assert elastic_v2.ray.get("ping", timeout=HOROVOD_FIRST_ANSWER_S) == "ping"
elastic_v2.ray.get("result", timeout=0.1)  # the executor's polling, untouched
elastic_v2.ray.get("result")
assert ray.waits == [FIRST_ANSWER_S, 0.1, None], ray.waits
assert elastic_v2.ray.exceptions is Ray.exceptions  # the rest passes through
print("ok")
"""


def test_the_elastic_executor_waits_longer_for_a_new_workers_first_answer():
    """horovod.ray's elastic executor gives a new worker a fixed 10 s to answer its first call, which a worker
    started on a busy node overran (the job ended before training); hvd_dqn lengthens that wait alone."""
    result = run([sys.executable, "-c", PATIENT_FIRST_ANSWER], timeout=300)
    assert result.stdout.strip() == "ok", result.stdout + result.stderr


@pytest.mark.parametrize("elastic", [False, True], ids=["static", "elastic"])
def test_a_killed_worker_ends_the_job_with_one_line(ray_head, tmp_path, elastic):
    """Static: Ray reports the dead actor. Elastic on a one-node cluster: Horovod's driver leaves out the failed
    worker's node, the only one, so the job ends too, with Horovod's line."""
    command = [sys.executable, "-m", "hvd_dqn.ray_train", *TRAIN, *(ELASTIC if elastic else []),
               f"--ray_address={ray_head}", f"--logdir={tmp_path / 'run'}", "--total_env_steps=1000000"]
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=subprocess_env(),
                           cwd=REPO)
    output, deadline, pids = [], time.monotonic() + 300, {}
    try:
        for line in job.stdout:  # until the world description names every rank's process
            output.append(line)
            pids.update({int(rank): int(pid) for rank, pid in re.findall(r"rank (\d+) \(local rank \d+, pid (\d+)\)",
                                                                          line)})
            if len(pids) == 2 or time.monotonic() > deadline:
                break
        assert len(pids) == 2, "".join(output)[-3000:]
        os.kill(pids[1], signal.SIGKILL)
        rest, _ = job.communicate(timeout=300)
    finally:
        if job.poll() is None:
            job.kill()
    lines = ("".join(output) + rest).strip().splitlines()
    assert job.returncode == 2, lines[-20:]
    assert lines[-1].startswith("hvd_dqn.ray_train: error: a Ray worker failed: "), lines[-20:]
    if elastic:
        assert "Horovod detected that one or more processes exited" in lines[-1], lines[-20:]
    assert not [line for line in lines if line.startswith("Traceback")], "\n".join(lines)


def _ray_workers():
    """The processes of hvd_dqn's Ray workers (Ray names an actor's process after its class)."""
    return [process for process in psutil.process_iter(["cmdline"])
            if "BaseHorovodWorker" in " ".join(process.info["cmdline"] or [])]


def _start_and_signal(command, tmp_path, send):
    """Starts the driver, waits for training to be under way, calls send(job), and returns the output and the
    seconds until the driver and every worker were gone."""
    log = tmp_path / "driver.txt"
    with open(log, "w") as output:
        job = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=subprocess_env(), cwd=REPO,
                               start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while "env steps 1,000/" not in log.read_text() and time.monotonic() < deadline and job.poll() is None:
                time.sleep(1)
            assert "env steps 1,000/" in log.read_text(), log.read_text()[-3000:]
            send(job)
            sent = time.monotonic()
            job.wait(timeout=STOP_BOUND_S)
            while _ray_workers() and time.monotonic() < sent + STOP_BOUND_S:
                time.sleep(0.5)
            return log.read_text(), job.returncode, time.monotonic() - sent
        finally:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)


def test_sigterm_to_the_driver_stops_every_worker_with_a_checkpoint_that_resumes(ray_head, tmp_path):
    """Left to its default, SIGTERM would end the driver alone and Ray would kill the workers it owns
    with no checkpoint."""
    logdir = tmp_path / "run"
    arguments = [*TRAIN, f"--ray_address={ray_head}", f"--logdir={logdir}", "--checkpoint_interval_env_steps=0"]
    text, returncode, seconds = _start_and_signal(
        [sys.executable, "-m", "hvd_dqn.ray_train", *arguments, "--total_env_steps=1000000"], tmp_path,
        lambda job: job.send_signal(signal.SIGTERM))
    assert not _ray_workers(), f"workers still running {seconds:.0f} s after SIGTERM"
    assert returncode == 0, text[-3000:]
    latest = checkpoint.latest_checkpoint(str(logdir))
    stopped_at = checkpoint.read_counters(latest)["env_steps"]
    assert text.strip().splitlines()[-1] == (
        f"hvd_dqn.ray_train: stopped by SIGTERM at {stopped_at:,} env steps on 2 Ray workers; logdir {logdir}. "
        f"To continue, run the same command with --resume")
    resumed = python_module("hvd_dqn.ray_train", [*arguments, "--resume", f"--total_env_steps={stopped_at + 1000}"],
                            timeout=600)
    assert f"resumed from {latest} at {stopped_at:,} env steps" in resumed.stderr, resumed.stderr[-3000:]


def test_sigterm_to_the_process_group_of_a_local_ray_instance_stops_with_a_checkpoint(tmp_path):
    """Without --ray_address the driver starts Ray here, in its own process group: a SIGTERM to the group (as
    `timeout` sends) must not end Ray's own processes under the workers' last steps."""
    logdir = tmp_path / "run"
    text, returncode, seconds = _start_and_signal(
        [sys.executable, "-m", "hvd_dqn.ray_train", *TRAIN, f"--logdir={logdir}", "--checkpoint_interval_env_steps=0",
         "--total_env_steps=1000000"], tmp_path, lambda job: os.killpg(job.pid, signal.SIGTERM))
    assert not _ray_workers(), f"workers still running {seconds:.0f} s after SIGTERM"
    assert returncode == 0 and "stopped by SIGTERM at " in text.strip().splitlines()[-1], text[-3000:]
    assert checkpoint.read_counters(checkpoint.latest_checkpoint(str(logdir)))["world_size"] == 2
