"""Shared helpers: launching `horovodrun` from pytest and running the package's entry points."""
from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

import pytest

import hvd_dqn  # noqa: F401  (first: it selects Keras 2 for TensorFlow in the tests and every process they start)
from hvd_dqn.quiet_tensorflow import DEFAULT_TF_CPP_MIN_LOG_LEVEL

# Ranks sharing a host run without a Horovod cycle by default (run/horovod_setup.py's runtime_defaults: the fastest
# for a job alone on its cores), so their background threads spin between allreduces. The suite runs two test files
# at once on 2 cores, and the spinning of one file's ranks takes cycles from the other's processes: a 1 ms cycle
# cut a short 2-rank run's CPU time by a fifth (sys time 7.9 against 3.1 s). Runs do not depend on it (their
# replicas and episodes are the same at any cycle); the default itself is tested in tests/run/test_horovod_setup.py.
os.environ.setdefault("HOROVOD_CYCLE_TIME", "1")

REPO = pathlib.Path(__file__).resolve().parent.parent
MP_SCRIPTS = REPO / "tests" / "mp"
PYTHON = sys.executable  # the venv's interpreter; a bare "python" under horovodrun may be another one


@contextlib.contextmanager
def environment(**values):
    """Sets these variables in this process (and so in every subprocess a test starts) for the block, then
    puts back what was there before."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _horovodrun() -> str:
    beside_python = pathlib.Path(sys.executable).parent / "horovodrun"
    return str(beside_python) if beside_python.exists() else (shutil.which("horovodrun") or "horovodrun")


def subprocess_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", DEFAULT_TF_CPP_MIN_LOG_LEVEL)  # hvd_dqn's own, for horovodrun too
    env["TF_USE_LEGACY_KERAS"] = "1"  # for test scripts that import TensorFlow before hvd_dqn
    # CI runs as root; Open MPI refuses to start as root without these.
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return env


def run(command, timeout: float, check: bool = True, cwd=None) -> subprocess.CompletedProcess:
    """Runs `command`, capturing output; on failure (or timeout) the output is in the assertion message."""
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=subprocess_env(),
                                cwd=cwd or REPO)
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"timed out after {timeout}s: {' '.join(map(str, command))}\n"
                    f"stdout:\n{error.stdout}\nstderr:\n{error.stderr}")
    if check and result.returncode != 0:
        pytest.fail(f"exit code {result.returncode}: {' '.join(map(str, command))}\n"
                    f"stdout:\n{result.stdout[-6000:]}\nstderr:\n{result.stderr[-6000:]}")
    return result


def horovodrun(np_: int, args, timeout: float = 600, controller: str = "gloo", check: bool = True):
    """`horovodrun -np N --<controller> <args>` on this machine."""
    command = [_horovodrun(), "-np", str(np_), f"--{controller}"]
    if controller == "mpi":
        # More ranks than cores is allowed (CI has 2 cores); root is allowed via the environment above.
        command += ["--mpi-args=--oversubscribe"]
    return run(command + [str(arg) for arg in args], timeout=timeout, check=check)


def python_module(module: str, args, timeout: float = 600, check: bool = True, cwd=None):
    return run([sys.executable, "-m", module] + [str(arg) for arg in args], timeout=timeout, check=check, cwd=cwd)


# File-system calls, as strace prints them, that create, change or remove something.
_WRITE_CALL = re.compile(r'^\d+\s+(?:(?:openat|open)\(.*O_(?:WRONLY|RDWR|CREAT)|(?:mkdir|mkdirat|rename|renameat2?|'
                         r'unlink|unlinkat|rmdir|truncate|link|symlink)\()')


def traced_by_rank(trace_dir) -> list:
    """A command prefix that runs the rest of the command under strace, recording its file-system calls in
    <trace_dir>/rank<R>.trace, R being the global rank (from Gloo's or Open MPI's environment)."""
    return ["sh", "-c", f'exec strace -f -qq -s 4096 -e trace=%file '
                        f'-o {trace_dir}/rank${{HOROVOD_RANK:-$OMPI_COMM_WORLD_RANK}}.trace "$@"', "sh"]


def writes_under(trace_file, folder) -> list:
    """The calls in an strace file that wrote, created or removed something under `folder`."""
    lines = pathlib.Path(trace_file).read_text().splitlines()
    return [line for line in lines if _WRITE_CALL.search(line) and str(folder) in line]


def episodes_without_wall_time(path) -> str:
    """episodes.csv without its wall_s column: what two runs of one seed must agree on byte for byte (the
    seconds differ from run to run)."""
    lines = pathlib.Path(path).read_text().splitlines(keepends=True)
    column = lines[0].rstrip("\n").split(",").index("wall_s")
    return "".join(",".join(field for index, field in enumerate(line.rstrip("\n").split(",")) if index != column)
                   + "\n" for line in lines)


def assert_two_ranks_resume_exactly(train, tmp_path) -> pathlib.Path:
    """`train(logdir, *flags)` (a 2-rank run checkpointing every 1,000 env steps) to 2,000 env steps in one go, and
    to 1,000 then resumed to 2,000: the replicas hold one model that learned between the checkpoints, and the resumed
    run plays the episodes and ends with the weights of the run that never stopped. Returns the whole run's logdir."""
    from hvd_dqn.logdir import checkpoint

    whole, halves = tmp_path / "whole", tmp_path / "halves"
    train(whole, "--total_env_steps=2000")
    train(halves, "--total_env_steps=1000")
    first = checkpoint.read_counters(checkpoint.latest_checkpoint(str(halves)))
    train(halves, "--total_env_steps=2000", "--resume")
    final_whole, final = (checkpoint.read_counters(checkpoint.latest_checkpoint(str(logdir)))
                          for logdir in (whole, halves))
    assert first["env_steps"] == 1000 and final["env_steps"] == 2000 and final["updates"] > first["updates"] > 0
    digests = final_whole["replica_weight_digests"]
    assert len(digests) == 2 and len(set(digests)) == 1  # the two replicas hold one model
    assert first["replica_weight_digests"] != digests  # and it learned between the checkpoints
    assert final["replica_weight_digests"] == digests  # exact resume: the weights of the run that never stopped
    assert episodes_without_wall_time(halves / "episodes.csv") == episodes_without_wall_time(whole / "episodes.csv")
    return whole


def wall_seconds(path) -> list:
    """episodes.csv's wall_s column, in row order."""
    lines = pathlib.Path(path).read_text().splitlines()
    column = lines[0].split(",").index("wall_s")
    return [float(line.split(",")[column]) for line in lines[1:]]


def rank_pids(log_text: str) -> dict:
    """{rank: pid} from the lines each rank logs at start ("rank 1 (local rank 1, pid 4242)")."""
    return {int(rank): int(pid) for rank, pid in re.findall(r"rank (\d+) \(local rank \d+, pid (\d+)\)", log_text)}


def wait_for_ranks(output, ranks: int, seconds: float = 300, until=lambda text: True) -> dict:
    """Waits until the job's output (a file) names every rank's pid and `until(text)` holds; returns the pids.
    The launcher forwards the ranks' lines in its own time, so a rank's file (metrics.csv) may exist before its
    start lines reach the output: a test that signals one rank waits for both."""
    deadline = time.monotonic() + seconds
    while True:
        text = pathlib.Path(output).read_text()
        pids = rank_pids(text)
        if (len(pids) == ranks and until(text)) or time.monotonic() > deadline:
            assert len(pids) == ranks and until(text), text[-3000:]
            return pids
        time.sleep(0.5)


def train_error_line(flags) -> str:
    """The one line `python -m hvd_dqn.train FLAGS` ends with for a bad setting: exit code 2, no traceback,
    nothing else on stderr."""
    result = python_module("hvd_dqn.train", flags, timeout=120, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


# Where the CartPole presets of QR-DQN, IQN, C51 and M-DQN stand after LEARNS_ENV_STEPS env steps: the last 100
# training episodes average 164.4 to 173.5 in the presets' runs of results/cartpole_qrdqn (quantiles10_lr4e-3_seed*),
# cartpole_iqn (seed*), cartpole_c51 (atoms201_seed*) and cartpole_mdqn (preset_runs), seeds 0-2 each (random
# play: 22). The suite checks that much learning,
# with room for another CPU's rounding. Whether a preset solves CartPole (475, at 54k to 124k env steps) is the
# evidence in those folders: training every agent that far would take a slow machine's CI past its time.
LEARNS_ENV_STEPS = 20_000
LEARNS_RETURN = 120.0


def train_and_check_learning(preset, logdir) -> None:
    """Trains `preset` (a --flagfile) into `logdir` for LEARNS_ENV_STEPS env steps and checks that its last 100
    training episodes, as played, average at least LEARNS_RETURN."""
    import csv

    python_module("hvd_dqn.train", [f"--flagfile={preset}", f"--logdir={logdir}",
                                    f"--total_env_steps={LEARNS_ENV_STEPS}", "--eval_interval_env_steps=0",
                                    "--checkpoint_interval_env_steps=0"], timeout=1500)
    from hvd_dqn.logdir import checkpoint

    final = checkpoint.read_counters(checkpoint.latest_checkpoint(str(logdir)))
    with open(pathlib.Path(logdir) / "episodes.csv") as handle:
        played = [float(row["return"]) for row in csv.DictReader(handle)]
    assert final["env_steps"] == LEARNS_ENV_STEPS and len(played) >= 100
    assert final["recent_returns"] == played[-100:]
    mean = sum(played[-100:]) / 100
    assert mean >= LEARNS_RETURN, (final["env_steps"], mean)


def assert_greedy_view_exports(q_network, network, observation, actions, folder) -> None:
    """A Q-value view of `network` (an agent's `q_values`) shares its variables in the same order, so a copy of
    weights reaches both; saved as the greedy SavedModel, it serves `actions` for `observation`."""
    import numpy as np
    import tensorflow as tf

    from hvd_dqn.agent.serving import save_greedy_policy

    assert [variable.name for variable in q_network.variables] == [variable.name for variable in network.variables]
    save_greedy_policy(q_network, observation.shape[1:], tf.float32, str(folder))
    served = tf.saved_model.load(str(folder)).signatures["serving_default"](observation=tf.constant(observation))
    assert (served["actions"].numpy() == np.asarray(actions)).all(), served["actions"].numpy()


# Two workers take whole files (scripts/test.sh: --dist loadfile), and xdist hands them out largest test count
# first, so a file of a few long runs could start last and keep one worker busy while the other idles. The
# files' measured seconds (tests/file_seconds.json) put the longest first instead, so the workers end together.
# HVD_DQN_RECORD_TEST_SECONDS=<path> writes a run's seconds per file there, to refresh the table.
FILE_SECONDS = REPO / "tests" / "file_seconds.json"


@pytest.hookimpl(optionalhook=True)  # xdist's hook: plain pytest (-p no:xdist) runs without it
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling
    seconds = json.loads(FILE_SECONDS.read_text()) if FILE_SECONDS.exists() else {}

    class LongestFilesFirst(LoadFileScheduling):
        def _assign_work_unit(self, node):
            ordered = sorted(self.workqueue.items(), key=lambda item: -seconds.get(item[0], 0.0))
            self.workqueue.clear()
            self.workqueue.update(ordered)
            super()._assign_work_unit(node)

    return LongestFilesFirst(config, log)


_seconds_by_file: dict = {}


def pytest_runtest_logreport(report):
    file = report.nodeid.split("::", 1)[0]
    _seconds_by_file[file] = _seconds_by_file.get(file, 0.0) + report.duration


def pytest_sessionfinish(session):
    path = os.environ.get("HVD_DQN_RECORD_TEST_SECONDS")
    if path and not hasattr(session.config, "workerinput"):  # the controller, which sees every worker's reports
        by_time = sorted(_seconds_by_file.items(), key=lambda item: -item[1])
        pathlib.Path(path).write_text(json.dumps({file: round(seconds, 1) for file, seconds in by_time}, indent=1)
                                      + "\n")


def _process_environment_names() -> set:
    """The names in this process's C-level environment, which a subprocess started without env= inherits. It can
    differ from os.environ: C code's setenv does not reach os.environ."""
    import ctypes

    environ = ctypes.POINTER(ctypes.c_char_p).in_dll(ctypes.CDLL(None), "environ")
    names, index = set(), 0
    while environ[index]:
        names.add(environ[index].split(b"=", 1)[0].decode(errors="replace"))
        index += 1
    return names


@pytest.fixture(autouse=True)
def _environment_as_os_environ():
    """Puts the process's environment back to os.environ after each test. A test that calls hvd.init() in
    pytest's own process starts Open MPI as a singleton, which sets PMIX_* and OMPI_* variables in the C-level
    environment only; a later test's `horovodrun` started without env= inherited them, and its ranks, taking
    them for their own job's, exited at once with an empty log."""
    yield
    for name in _process_environment_names() - set(os.environ):
        os.unsetenv(name)
