"""python -m hvd_dqn.spark_train in Spark's local mode on this machine (pyspark from the `spark` extra, Java from
the distribution, both installed by scripts/setup.sh): two Spark tasks train CartPole as two Horovod ranks with
identical replicas, the checkpoint evaluates, and bad flags are one line."""
import json
import shutil

import pytest

from hvd_dqn.logdir import checkpoint

from conftest import REPO, python_module

TRAIN = [f"--flagfile={REPO / 'configs' / 'cartpole.flags'}", "--eval_interval_env_steps=0",
         "--log_interval_env_steps=1000", "--stop_at_train_return=inf"]


def _spark_or_skip():
    try:
        import pyspark  # noqa: F401
    except ImportError as error:
        pytest.skip(f"pyspark is not installed ({error}); scripts/setup.sh installs the spark extra")
    if shutil.which("java") is None:
        pytest.skip("no Java runtime on PATH; scripts/setup.sh installs default-jre-headless")


def test_two_spark_tasks_train_with_equal_replicas_and_the_checkpoint_evaluates(tmp_path):
    _spark_or_skip()
    logdir = tmp_path / "run"
    result = python_module("hvd_dqn.spark_train", [*TRAIN, "--num_proc=2", f"--logdir={logdir}",
                                                   "--total_env_steps=3000", "--checkpoint_interval_env_steps=1500"],
                           timeout=600)
    episodes = len((logdir / "episodes.csv").read_text().strip().splitlines()) - 1
    assert result.stdout.strip().splitlines()[-1] == (
        f"hvd_dqn.spark_train: trained 3,000 env steps, 502 updates, {episodes:,} episodes in 2 Spark tasks; "
        f"logdir {logdir}")
    saved = checkpoint.read_counters(checkpoint.latest_checkpoint(str(logdir)))
    assert saved["env_steps"] == 3000 and saved["world_size"] == 2
    assert len(set(saved["replica_weight_digests"])) == 1  # the allreduce kept the replicas bitwise equal
    report = tmp_path / "eval.json"
    python_module("hvd_dqn.evaluate", [f"--logdir={logdir}", "--episodes=4", f"--json={report}"], timeout=300)
    assert json.loads(report.read_text())["env_steps"] == 3000


def test_executors_without_horovod_are_one_line(tmp_path):
    """A Spark whose Python workers lack Horovod (PYSPARK_PYTHON pointing elsewhere): the task's Python error,
    in one line, not Spark's Java stack trace."""
    _spark_or_skip()
    import sys

    from conftest import environment

    bare = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    with environment(PYSPARK_PYTHON=bare):
        result = python_module("hvd_dqn.spark_train", [*TRAIN, "--num_proc=2", f"--logdir={tmp_path / 'run'}",
                                                       "--total_env_steps=2000"], timeout=300, check=False)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert lines[-1].startswith("hvd_dqn.spark_train: error: a Spark task failed: ModuleNotFoundError: No module "
                                "named "), lines[-5:]


@pytest.mark.parametrize("arguments, message", [
    (["--num_proc=0"], "--num_proc=0: must be a positive integer"),
    (["--batch_size=0"], "--batch_size=0: must be a positive integer"),
    (["--num_proc=3"], "--num_envs=8 (the job's envs) must split evenly over the 3 ranks (or add --counts_per_rank for that many "
                     "envs on each rank)"),
])
def test_bad_flags_are_one_line(tmp_path, arguments, message):
    result = python_module("hvd_dqn.spark_train", [*TRAIN, f"--logdir={tmp_path / 'run'}", *arguments], timeout=300,
                           check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1].startswith(f"hvd_dqn.spark_train: error: {message}"), \
        result.stderr[-3000:]
