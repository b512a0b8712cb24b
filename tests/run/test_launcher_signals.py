"""A signal to the launcher a user or scheduler started (horovodrun, over Open MPI or Gloo) stops
every rank: SIGTERM with a checkpoint that a --resume continues from at once, SIGKILL within the same bound.
Over MPI horovodrun becomes `sh -c "mpirun ..."`, which passes no signal on: the ranks watch their launcher
(hvd_dqn/run/launcher_watch.py)."""
import signal
import subprocess
import time

import psutil
import pytest

from hvd_dqn.logdir import checkpoint
from hvd_dqn.run import launcher_watch

from conftest import PYTHON, REPO, _horovodrun, horovodrun, subprocess_env, wait_for_ranks
from test_reliability import CARTPOLE

BOUND_SECONDS = 60  # the ranks' stop, their last checkpoint's write included (CartPole's: a fraction of a second)


def _job_processes(logdir):
    """Every process left of the job: its ranks and mpirun (their command lines name the logdir)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if any(str(logdir) in part for part in process.info["cmdline"] or []):
            found.append(process)
    return found


def _start(controller, logdir, output):
    command = [_horovodrun(), "-np", "2", f"--{controller}", PYTHON, "-m", "hvd_dqn.train", *CARTPOLE,
               f"--logdir={logdir}", "--total_env_steps=1000000", "--checkpoint_interval_env_steps=0",
               "--log_interval_env_steps=1000"]
    return subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=subprocess_env(), cwd=REPO)


@pytest.mark.parametrize("controller", ["mpi", "gloo"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_signal_to_horovodrun_ends_every_rank(tmp_path, controller, signum):
    logdir, log = tmp_path / "run", tmp_path / "output.txt"
    with open(log, "w") as output:
        job = _start(controller, logdir, output)
        try:
            wait_for_ranks(log, 2, until=lambda text: (logdir / "metrics.csv").exists())
            job.send_signal(signum)  # the launcher alone, as `timeout`, a CI runner or a supervisor would
            sent = time.monotonic()
            while _job_processes(logdir) and time.monotonic() < sent + BOUND_SECONDS:
                time.sleep(0.5)
            left = [" ".join(process.cmdline())[:120] for process in _job_processes(logdir)]
            assert left == [], f"still running {time.monotonic() - sent:.0f} s after {signum.name}: {left}"
        finally:
            job.kill()
            for process in _job_processes(logdir):
                process.kill()
    text = log.read_text()
    if signum == signal.SIGKILL:
        return  # the ranks may stop with a checkpoint or without one; they must not train on
    # Without --checkpoint_replay the stop says what the checkpoint lacks and what a resume does instead.
    assert "stopped by " in text and (" holds the networks, the optimizer and the counters, not the ranks' memories "
                                      "(--checkpoint_replay keeps them): --resume refills each rank's replay memory "
                                      "with ") in text, text[-3000:]
    latest = checkpoint.latest_checkpoint(str(logdir))
    stopped_at = checkpoint.read_counters(latest)["env_steps"]
    resumed = horovodrun(2, [PYTHON, "-m", "hvd_dqn.train", *CARTPOLE, f"--logdir={logdir}", "--resume",
                             f"--total_env_steps={stopped_at + 1000}"], timeout=300)
    assert f"resumed from {latest} at {stopped_at:,} env steps" in resumed.stdout + resumed.stderr
    assert "; refilling each rank's replay memory with " in resumed.stdout + resumed.stderr


def test_the_launcher_chain_is_what_started_the_ranks():
    assert launcher_watch.is_launcher(["/bin/sh", "-c", "mpirun --allow-run-as-root -np 2 python -m x"])
    assert launcher_watch.is_launcher(["/bin/sh", "-c", "env HOROVOD_RANK=0 HOROVOD_SIZE=2 python -m x"])
    assert launcher_watch.is_launcher(["mpirun", "-np", "2", "python"])
    assert launcher_watch.is_launcher(["/usr/bin/python3", "/venv/bin/horovodrun", "-np", "2", "python"])
    assert not launcher_watch.is_launcher(["-bash"]) and not launcher_watch.is_launcher(["/bin/sh", "-c", "make"])
    assert not launcher_watch.is_launcher(["python", "-m", "hvd_dqn.train"]) and not launcher_watch.is_launcher([])
    # A process started from a shell (this test's) has no launcher above it: nothing to watch.
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert launcher_watch.launcher_chain(child.pid) == []
    finally:
        child.kill()


def test_the_watch_reports_a_launcher_that_ended():
    launcher = subprocess.Popen(["sleep", "30"])
    chain = [(launcher.pid, psutil.Process(launcher.pid).create_time(), "sleep 30")]
    reported = []
    watch = launcher_watch.LauncherWatch(reported.append, chain=chain, seconds=0.05).start()
    time.sleep(0.3)
    assert reported == []
    launcher.kill()
    launcher.wait()
    deadline = time.monotonic() + 5
    while not reported and time.monotonic() < deadline:
        time.sleep(0.05)
    watch.stop()
    assert reported == [f"word that its launcher ended (sleep 30, pid {launcher.pid})"]
