"""Training on a Spark cluster: `python -m hvd_dqn.spark_train --num_proc=N [--spark_master=URL] <the flags of
hvd_dqn.train>`, or the same program given to `spark-submit`.

The same training as `horovodrun -np N python -m hvd_dqn.train`, launched by Horovod's own Spark integration
(`horovod.spark.run`): N Spark tasks each start one rank, Horovod forms its Gloo ring between them, and each
rank runs `hvd_dqn.run.trainer.Trainer`. This driver checks the flags first, so a bad flag is one line before
Spark starts; it ends with one line: the run's summary, or the first rank's error.

Without --spark_master, and when spark-submit has not set one, Spark runs in local mode on this machine
(`local[N]`, one task slot per rank). Rank 0 writes --logdir, which must be a folder every executor can reach
(a shared file system, or s3:// and gs:// through the `cloud` extra) unless the job runs on one machine.
"""
from __future__ import annotations

import os
import re
import sys
import threading

from absl import flags, logging

from hvd_dqn import quiet_tensorflow
from hvd_dqn.cli import Command
from hvd_dqn.config import ConfigError, TrainConfig
from hvd_dqn.flags import config_from_flags, define_flags
from hvd_dqn.logdir import storage
from hvd_dqn.logdir.checkpoint import CheckpointError
from hvd_dqn.run.ray_or_spark_rank import train_as_rank

define_flags()  # hvd_dqn.train's flags, which this program takes as its own

PROGRAM = "hvd_dqn.spark_train"
COMMAND = Command(PROGRAM)

flags.DEFINE_integer("num_proc", 2, "Horovod ranks, one Spark task each.")
flags.DEFINE_string("spark_master", "", "Spark master URL (spark://HOST:7077, yarn, k8s://..., local[N]); empty: "
                                        "the one spark-submit set, else local mode with one task slot per rank.")
flags.DEFINE_integer("start_timeout_s", 120, "Seconds to wait for Spark to start every rank's task.")
FLAGS = flags.FLAGS


def train_on_task(config: TrainConfig) -> dict:
    """Runs in each rank's process, which horovod.spark started from a Spark task."""
    return train_as_rank(config)


def _check_spark_flags() -> None:
    for name in ("num_proc", "start_timeout_s"):
        if FLAGS[name].value < 1:
            raise ConfigError(f"--{name}={FLAGS[name].value}: must be a positive integer")


def _start_spark():
    """The job's SparkSession: --spark_master, else spark-submit's master, else local mode."""
    try:
        from pyspark import SparkConf
        from pyspark.sql import SparkSession
    except ImportError:
        raise ConfigError("needs pyspark: pip install -c constraints.txt -e '.[spark]' (scripts/setup.sh installs "
                          "it)") from None
    # Set for the ranks, which inherit this process's environment: TensorFlow's C++ log threshold, Keras 2
    # behind tf.keras whatever a rank imports first (see hvd_dqn/__init__.py).
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", quiet_tensorflow.DEFAULT_TF_CPP_MIN_LOG_LEVEL)
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    # Progress bars would cut through rank 0's progress lines.
    builder = SparkSession.builder.appName(f"hvd_dqn {FLAGS.env_id}").config("spark.ui.showConsoleProgress", "false")
    if FLAGS.spark_master:
        builder = builder.master(FLAGS.spark_master)
    elif not SparkConf().contains("spark.master"):
        # Local mode: Spark's driver on 127.0.0.1 only, and no web UI (it would listen on every interface);
        # its Python workers run this interpreter (by default they run `python3` from PATH, which may not
        # have Horovod and hvd_dqn).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = (builder.master(f"local[{FLAGS.num_proc}]").config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1").config("spark.ui.enabled", "false"))
    try:
        spark = builder.getOrCreate()
    except Exception as error:  # noqa: BLE001 - pyspark's start-up errors have no common base class
        reason = storage.describe(error)
        if "JAVA_GATEWAY_EXITED" in reason or "JAVA_HOME" in reason or "java" in reason.lower():
            reason += " (Spark needs a Java runtime: scripts/setup.sh installs one; or set JAVA_HOME)"
        raise ConfigError(f"Spark could not start: {reason}") from None
    # A failed task is reported as one line from its Python error (_task_error), not as Spark's log of it.
    spark.sparkContext.setLogLevel("FATAL")
    return spark


def _task_error(error: BaseException) -> str:
    """The Python error a Spark task ended with (the last `SomeError: ...` line of Spark's report, whose
    Java stack trace says nothing more), else the report's first line."""
    text = str(error)
    python_errors = re.findall(r"^(\w+(?:Error|Exception): .*)$", text, flags=re.MULTILINE)
    found = python_errors[-1] if python_errors else text.strip().splitlines()[0] if text.strip() else repr(error)
    if "No module named" in found:
        found += (" (each executor's Python must have Horovod and hvd_dqn installed: set spark.pyspark.python, or "
                  "PYSPARK_PYTHON, to the project's venv)")
    return found


def train_on_spark(config: TrainConfig) -> dict:
    """Driver: starts the ranks as Spark tasks, trains, returns rank 0's counters; ConfigError with one line."""
    spark = _start_spark()
    import horovod.spark

    # horovod.spark runs the Spark job on a thread of its own, whose failure would print a traceback and
    # then reach this thread only as "Spark job has failed, see the error above": the thread's error is kept
    # for the one line instead.
    thread_errors = []
    hook, threading.excepthook = threading.excepthook, lambda failed: thread_errors.append(failed.exc_value)
    try:
        results = horovod.spark.run(train_on_task, args=(config,), num_proc=FLAGS.num_proc, use_gloo=True,
                                    start_timeout=FLAGS.start_timeout_s, verbose=0,
                                    stdout=sys.stdout, stderr=sys.stderr)
    except Exception as error:  # noqa: BLE001 - Spark's and Horovod's failures: a rank died, a timeout
        raise ConfigError(f"a Spark task failed: {_task_error(thread_errors[0] if thread_errors else error)}") \
            from None
    finally:
        threading.excepthook = hook
        spark.stop()
    errors = [result["error"] for result in results if "error" in result]
    if errors:
        raise ConfigError(errors[0])
    return results[0]["counters"]


def main(argv) -> None:
    logging.set_verbosity(logging.WARNING)
    if len(argv) > 1:
        COMMAND.fail(f"unexpected arguments {' '.join(argv[1:])}; every setting is a --flag (see --helpfull)")
    try:
        _check_spark_flags()
        config = config_from_flags(check_logdir_writable=True)
        counters = train_on_spark(config)
    except (ConfigError, CheckpointError) as error:
        COMMAND.fail(str(error))
    print(f"{PROGRAM}: trained {counters['env_steps']:,} env steps, {counters['updates']:,} updates, "
          f"{counters['episodes']:,} episodes in {FLAGS.num_proc} Spark tasks; logdir {config.logdir}", flush=True)


def run() -> None:
    """Console-script entry point."""
    COMMAND.run(main)


if __name__ == "__main__":
    sys.exit(run())
