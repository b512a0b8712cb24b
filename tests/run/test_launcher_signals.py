"""A signal to the launcher a user or scheduler started (horovodrun, over Open MPI or Gloo) stops
every rank: SIGTERM with a checkpoint that a --resume continues from at once, SIGKILL within the same bound.
Over MPI horovodrun becomes `sh -c "mpirun ..."`, which passes no signal on: the ranks watch their launcher
(hvd_dqn/run/launcher_watch.py)."""
import os
import pathlib
import re
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
# Runs its arguments with SIGINT at its default, as a terminal starts its foreground job. Tests run in the background
# (`nohup`, `command &` in a script) inherit SIGINT ignored, and bash can neither trap nor reset a signal that was
# ignored when it started: a script under test would never see the Ctrl-C.
_WITH_SIGINT = [PYTHON, "-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                "os.execvp(sys.argv[1], sys.argv[1:])"]


def _job_processes(logdir):
    """Every process left of the job: its ranks and mpirun (their command lines name the logdir, or whatever
    other path every process of the job names, as a rank's script)."""
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
    assert launcher_watch.is_launcher(["bash", "scripts/train.sh", "--seed=3"])
    assert launcher_watch.is_launcher(["/bin/bash", "/home/u/hvd_dqn/scripts/train.sh"])
    assert not launcher_watch.is_launcher(["bash", "my_train.sh"])
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


# A rank that notes when SIGTERM reaches it and then keeps noting that it is alive, as a rank writing a large
# checkpoint would be, until something stronger than SIGTERM ends it.
_SLOW_RANK = """
import os, signal, sys, time
folder, rank = sys.argv[1], os.environ["OMPI_COMM_WORLD_RANK"]
def note(name):
    path = os.path.join(folder, name + "." + rank)
    with open(path + ".tmp", "w") as handle:
        handle.write(repr(time.time()))
    os.replace(path + ".tmp", path)
signal.signal(signal.SIGTERM, lambda signum, frame: note("term"))
note("started")
while True:
    time.sleep(0.1)
    if os.path.exists(os.path.join(folder, "term." + rank)):
        note("alive")
"""


@pytest.mark.parametrize("sigkill_timeout", [None, 4], ids=["default", "4s"])
def test_mpirun_gives_the_ranks_its_sigkill_timeout_after_a_sigterm_of_its_own(tmp_path, sigkill_timeout):
    """docs/resume.md: a SIGTERM to mpirun (or horovodrun over MPI, which becomes `sh -c mpirun`) reaches the ranks
    `odls_base_sigkill_timeout` seconds later (1 by default) and SIGKILL as long again after it; a job started with
    OMPI_MCA_odls_base_sigkill_timeout=N in its environment gives its ranks N seconds to write their checkpoint."""
    script = tmp_path / "slow_rank.py"
    script.write_text(_SLOW_RANK)
    env = subprocess_env()
    env.pop("OMPI_MCA_odls_base_sigkill_timeout", None)
    if sigkill_timeout is not None:
        env["OMPI_MCA_odls_base_sigkill_timeout"] = str(sigkill_timeout)
    job = subprocess.Popen([_horovodrun(), "-np", "2", "-H", "localhost:2", "--mpi", PYTHON, str(script),
                            str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"started.{rank}").exists() for rank in (0, 1)):
            assert time.monotonic() < deadline and job.poll() is None, "the ranks did not start"
            time.sleep(0.2)
        mpirun = [process for process in psutil.Process(job.pid).children(recursive=True)
                  if process.name() == "mpirun"]
        assert len(mpirun) == 1
        sent = time.time()
        mpirun[0].send_signal(signal.SIGTERM)
        job.wait(timeout=60)
    finally:
        job.kill()
        for process in _job_processes(script):
            process.kill()
    grace = sigkill_timeout or 1
    for rank in (0, 1):
        term = float((tmp_path / f"term.{rank}").read_text())
        alive = float((tmp_path / f"alive.{rank}").read_text())
        assert grace - 0.5 < term - sent < grace + 2  # SIGCONT, the timeout, then SIGTERM
        assert grace - 0.5 < alive - term < grace + 0.5  # the timeout again, then SIGKILL
    if sigkill_timeout is None:  # the figure the README and docs/resume.md give
        readme = " ".join((REPO / "README.md").read_text().split())
        resume = " ".join((REPO / "docs" / "resume.md").read_text().split())
        assert f"(horovodrun over Gloo 5 s, Open MPI's mpirun {grace} s)" in readme
        assert f"waits its `odls_base_sigkill_timeout` ({grace} s by default), sends SIGTERM" in resume


@pytest.mark.parametrize("controller, how", [("mpi", "Ctrl-C"), ("gloo", "SIGTERM"), ("mpi", "SIGKILL")])
def test_a_stop_of_scripts_train_sh_reaches_the_ranks_and_ends_with_their_memories(tmp_path, controller, how):
    """`NP=2 scripts/train.sh`, stopped as a user or a scheduler stops it: Ctrl-C (SIGINT to the terminal's
    process group), SIGTERM to the script, or SIGKILL to it. The script starts horovodrun under setsid
    and passes a stop to the ranks itself, so no launcher's SIGKILL cuts their checkpoint short (a Ctrl-C that
    reached mpirun would end the job with exit status 1 a second later, whatever the ranks were writing); killed
    outright, the ranks see it gone and stop with a checkpoint. Either way with every rank's memory."""
    logdir, log = tmp_path / "run", tmp_path / "output.txt"
    env = dict(subprocess_env(), NP="2", FLAGFILE="configs/cartpole.flags", HOROVODRUN_ARGS=f"--{controller}")
    command = [*_WITH_SIGINT, "bash", str(REPO / "scripts" / "train.sh"), *CARTPOLE[1:], f"--logdir={logdir}",
               "--total_env_steps=1000000", "--checkpoint_interval_env_steps=0", "--log_interval_env_steps=1000",
               "--checkpoint_replay"]
    with open(log, "w") as output:
        # A process group of its own (setsid), as a terminal gives the job it runs in the foreground.
        script = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                  start_new_session=True)
        try:
            wait_for_ranks(log, 2, until=lambda text: (logdir / "metrics.csv").exists())
            if how == "Ctrl-C":
                os.killpg(script.pid, signal.SIGINT)
            else:
                script.send_signal(signal.SIGTERM if how == "SIGTERM" else signal.SIGKILL)
            sent = time.monotonic()
            if how != "SIGKILL":
                try:
                    status = script.wait(timeout=BOUND_SECONDS)
                except subprocess.TimeoutExpired:
                    status = None
                assert status == 0, log.read_text()[-3000:]
            while _job_processes(logdir) and time.monotonic() < sent + BOUND_SECONDS:
                time.sleep(0.5)
            assert _job_processes(logdir) == [], f"still running {BOUND_SECONDS} s after {how}"
        finally:
            script.kill()
            for process in _job_processes(logdir):
                process.kill()
    text = log.read_text()
    # Rank 0 logs the stop as its own or, when rank 1 had it first (the script signals the ranks one after the
    # other; killed, it is missed by each rank's watch in its own second), as rank 1's.
    own = ("SIGTERM" if how != "SIGKILL" else
           f"word that its launcher ended (bash {REPO / 'scripts' / 'train.sh'} {CARTPOLE[1]}")
    stop = re.escape(own) + (r".*, pid \d+\)" if how == "SIGKILL" else "") + r"( \(at rank 1\))?"
    assert re.search(f"stopped by {stop} at [\\d,]+ env steps; checkpoint", text), text[-3000:]
    assert " holds the networks, the optimizer, the counters and every rank's memory" in text, text[-3000:]
    latest = checkpoint.latest_checkpoint(str(logdir))
    assert all((pathlib.Path(latest) / f"replay-rank{rank:05d}.npz").exists() for rank in (0, 1))
