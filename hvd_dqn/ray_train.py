"""Training on a Ray cluster: `python -m hvd_dqn.ray_train --num_workers=N [--cpus_per_worker=C] [--use_gpu]
[--ray_address=auto] <the flags of hvd_dqn.train>`.

The same training as `horovodrun -np N python -m hvd_dqn.train`, launched by Horovod's own Ray integration
(`horovod.ray.RayExecutor`): Ray places N actors (C CPUs and, with --use_gpu, one GPU each), Horovod forms its
Gloo ring between them, and each actor runs one rank of `hvd_dqn.run.trainer.Trainer`. This driver process checks
the flags first, so a bad flag is one line before any Ray process starts; it then prints rank 0's progress
(Ray forwards the actors' logs) and ends with one line: the run's summary, or the first worker's error.

Without --ray_address a Ray instance is started on this machine, on 127.0.0.1 only; --ray_address=auto joins
the cluster this machine belongs to (`ray start`), ray://HOST:10001 a remote one through Ray Client.

SIGTERM, SIGINT or SIGHUP to this driver stops the job as a SIGTERM to every rank does: the driver passes the
word to the workers through a small Ray actor they look at once a second, they stop together after the same
iteration and write a checkpoint, and the driver ends with one line saying where to --resume from.
Left to its default, the signal would end the driver alone, and Ray would then kill the workers it owns with
no checkpoint. A second signal, or workers that have not finished within STOP_BOUND_S, ends the driver at once.

With --elastic the workers run on Horovod's elastic Ray executor (between --min_workers and --num_workers
of them) and hvd_dqn's elastic state (hvd_dqn/run/elastic.py) rolls the survivors back to the last commit when
a worker is lost, as under an elastic horovodrun.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
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

PROGRAM = "hvd_dqn.ray_train"
COMMAND = Command(PROGRAM)

flags.DEFINE_integer("num_workers", 2, "Ray workers, one Horovod rank each.")
flags.DEFINE_integer("cpus_per_worker", 1, "CPUs Ray reserves for each worker.")
flags.DEFINE_bool("use_gpu", False, "Reserve one GPU per worker (Horovod pins each rank to its GPU).")
flags.DEFINE_string("ray_address", "", "Ray cluster to join: auto, HOST:PORT or ray://HOST:10001; empty: start a "
                                       "Ray instance on this machine, on 127.0.0.1 only.")
flags.DEFINE_integer("placement_timeout_s", 100, "Seconds to wait for Ray to find resources for every worker.")
flags.DEFINE_list("network_interface", [], "Network interfaces the workers' Gloo ring uses (Horovod's "
                  "--network-interface), e.g. eth0; empty: lo for a Ray instance started here, Horovod's detection "
                  "otherwise. --elastic on a one-node cluster needs it: Horovod detects interfaces across 2 nodes.")
flags.DEFINE_integer("min_workers", 1, "With --elastic: training goes on while at least this many workers live; "
                                       "--num_workers is then the most it grows to.")
flags.DEFINE_integer("cooldown_s", 10, "With --elastic: seconds a node whose worker failed is left out before a "
                                       "replacement may be placed there (Horovod blacklists the whole node; on a "
                                       "one-node cluster that ends the job).")
FLAGS = flags.FLAGS

STOP_BOUND_S = 60  # after a signal: the workers' last iterations and checkpoint, before the driver gives up
WATCH_SECONDS = 1.0  # how often each worker looks for the driver's stop request


def train_on_worker(config: TrainConfig, stop_flag=None) -> dict:
    """Runs in each Ray worker as one Horovod rank (RayExecutor has set its HOROVOD_* variables); `stop_flag`:
    the driver's StopFlag actor, looked at once a second."""
    return train_as_rank(config, lambda trainer: _watching(stop_flag, trainer.signals.request))


class StopFlag:
    """A Ray actor (no CPU of its own) holding the driver's stop request: what stopped it, or None."""

    def __init__(self):
        self.reason = None

    def request(self, reason: str) -> None:
        self.reason = self.reason or reason

    def requested(self):
        return self.reason


@contextlib.contextmanager
def _watching(stop_flag, on_request):
    """In a worker, while training: a daemon thread that calls on_request(reason) once the driver has asked
    the job to stop. If the flag cannot be read (its actor gone with the driver), Ray ends this worker too."""
    if stop_flag is None:
        yield
        return
    import ray

    done = threading.Event()

    def watch():
        while not done.wait(WATCH_SECONDS):
            try:
                reason = ray.get(stop_flag.requested.remote(), timeout=10)
            except Exception as error:  # noqa: BLE001 - any failure to read the flag: Ray's own end handles it
                logging.debug("the driver's stop flag cannot be read: %s", error)
                continue
            if reason:
                on_request(reason)
                return

    thread = threading.Thread(target=watch, name="ray-driver-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()


class DriverSignals:
    """In the driver: SIGTERM, SIGINT and SIGHUP (not where ignored, as under nohup) ask the workers to stop
    through the StopFlag actor. The handler only records the signal; a thread makes the Ray call (a Ray call
    inside a handler would run in the middle of the main thread's own ray.get) and, if the workers have not
    returned within STOP_BOUND_S, ends the driver, so Ray ends the workers it owns."""

    def __init__(self, stop_flag, bound_s: float = STOP_BOUND_S):
        self.received = None
        self.stop_flag = stop_flag
        self._bound_s = bound_s
        self._signalled = threading.Event()
        self._finished = threading.Event()

    def install(self) -> "DriverSignals":
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            if signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN:
                continue
            signal.signal(signum, self._handle)
        threading.Thread(target=self._forward, name="driver-stop", daemon=True).start()
        return self

    def finished(self) -> None:
        self._finished.set()

    def _handle(self, signum, frame) -> None:
        if self.received:  # a second signal: stop now
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.received = signal.Signals(signum).name
        self._signalled.set()

    def _forward(self) -> None:
        self._signalled.wait()
        if self._finished.is_set():
            return
        print(f"{PROGRAM}: received {self.received}: the workers finish the steps under way and write a "
              f"checkpoint (at most {self._bound_s:g} s)", file=sys.stderr, flush=True)
        self.stop_flag.request.remote(f"{self.received} to the Ray driver")
        if not self._finished.wait(self._bound_s):
            print(f"{PROGRAM}: error: the workers did not stop within {self._bound_s:g} s of {self.received}; "
                  f"ending them without a checkpoint", file=sys.stderr, flush=True)
            os._exit(1)  # Ray ends the actors this driver owns


def _check_ray_flags() -> None:
    for name in ("num_workers", "cpus_per_worker", "placement_timeout_s", "min_workers", "cooldown_s"):
        if FLAGS[name].value < 1:
            raise ConfigError(f"--{name}={FLAGS[name].value}: must be a positive integer")
    if FLAGS.elastic and FLAGS.ray_address.startswith("ray://"):
        raise ConfigError("--elastic: not available through Ray Client (ray://); run this driver on a node of the "
                          "cluster with --ray_address=auto")
    if FLAGS.elastic and FLAGS.min_workers > FLAGS.num_workers:
        raise ConfigError(f"--min_workers={FLAGS.min_workers}: more than --num_workers={FLAGS.num_workers}, the most "
                          f"an elastic job grows to")


def _start_ray():
    """Joins --ray_address, or starts Ray on this machine bound to loopback; returns the ray module."""
    if not FLAGS.ray_address:
        # Ray takes the loopback address as the node's when this is 0 (its default on macOS and Windows),
        # and then binds its servers to it; read when ray is imported.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError:
        raise ConfigError("needs Ray: pip install -c constraints.txt -e '.[ray]' (scripts/setup.sh installs it)") \
            from None

    # Set in every worker from its start: TensorFlow's C++ log threshold (as importing hvd_dqn sets it), Keras 2
    # behind tf.keras whatever the worker imports first (see hvd_dqn/__init__.py), and horovod.ray's use of a
    # Ray API that Ray 2.60 deprecates not warned about once per worker.
    tf_log_level = os.environ.get("TF_CPP_MIN_LOG_LEVEL", quiet_tensorflow.DEFAULT_TF_CPP_MIN_LOG_LEVEL)
    runtime_env = {"env_vars": {"TF_CPP_MIN_LOG_LEVEL": tf_log_level,
                                "TF_USE_LEGACY_KERAS": "1",
                                "PYTHONWARNINGS": "ignore::DeprecationWarning"}}
    unreachable = _unreachable(FLAGS.ray_address)
    if unreachable:  # Ray itself would retry for minutes before giving up
        raise ConfigError(f"--ray_address={FLAGS.ray_address}: cannot join a Ray cluster there ({unreachable})")
    try:
        if FLAGS.ray_address:
            ray.init(address=FLAGS.ray_address, runtime_env=runtime_env, log_to_driver=True)
        else:
            with _group_signals_blocked_in_children():
                ray.init(include_dashboard=False, runtime_env=runtime_env, log_to_driver=True)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise ConfigError(f"--ray_address={FLAGS.ray_address}: cannot join a Ray cluster there "
                          f"({storage.describe(error)})") from None
    needed = FLAGS.num_workers * FLAGS.cpus_per_worker
    available = ray.cluster_resources().get("CPU", 0)
    if not FLAGS.ray_address and available < needed:  # a local instance cannot grow; a cluster may autoscale
        ray.shutdown()
        raise ConfigError(f"--num_workers={FLAGS.num_workers} x --cpus_per_worker={FLAGS.cpus_per_worker} needs "
                          f"{needed} CPUs; this machine's Ray instance has {available:g}")
    return ray


@contextlib.contextmanager
def _group_signals_blocked_in_children():
    """The local Ray instance's processes (its GCS, raylet and agents) start in this driver's process group,
    so a SIGTERM or SIGHUP to the group (`timeout`, a closed terminal, `kill -TERM -PGID`) would end them
    while the workers still need them to finish and checkpoint. Started with those signals blocked (a mask is
    inherited across fork and exec), they hear only the driver, which stops them at its end; Ray itself blocks
    SIGINT in them, for Ctrl-C."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGHUP})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _unreachable(address: str):
    """Why nothing answers at a HOST:PORT or ray://HOST:PORT address, or None (also for "auto" and "")."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return None
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as error:
        return error.strerror or str(error) or type(error).__name__
    return None


def train_on_ray(config: TrainConfig):
    """Driver: starts the workers, trains; returns rank 0's counters and the signal that stopped the job early
    (or None); raises ConfigError with one line."""
    ray = _start_ray()
    from horovod.ray import RayExecutor

    nics = set(FLAGS.network_interface) or (None if FLAGS.ray_address else {"lo"})
    settings = RayExecutor.create_settings(timeout_s=60, placement_group_timeout_s=FLAGS.placement_timeout_s,
                                           nics=nics)
    resources = dict(cpus_per_worker=FLAGS.cpus_per_worker, use_gpu=FLAGS.use_gpu,
                     gpus_per_worker=1 if FLAGS.use_gpu else None)
    if config.elastic:
        _restore_ray_state_module(ray)
        _quiet_rendezvous_errors()
        _patient_first_answer(ray)
        # Horovod's elastic driver asks Ray for the cluster's nodes, places up to --num_workers workers, and
        # after a worker fails re-forms the ring from the survivors on other nodes; the failed worker's node
        # is left out for the cool-down (all of it: on a one-node cluster the job ends).
        executor = RayExecutor(settings, min_workers=FLAGS.min_workers, max_workers=FLAGS.num_workers,
                               cooldown_range=(FLAGS.cooldown_s, FLAGS.cooldown_s), **resources)
    else:
        executor = RayExecutor(settings, num_workers=FLAGS.num_workers, **resources)
    signals = DriverSignals(ray.remote(num_cpus=0)(StopFlag).remote()).install()
    try:
        executor.start()
        results = executor.run(train_on_worker, args=[config, signals.stop_flag])
    except (ray.exceptions.RayError, TimeoutError, RuntimeError) as error:
        raise ConfigError(f"a Ray worker failed: {storage.describe(error)}") from None
    finally:
        signals.finished()
        # The elastic adapter asserts that its driver has finished, which it has not if start() failed.
        with contextlib.suppress(AssertionError):
            executor.shutdown()
        ray.shutdown()
    errors = [result["error"] for result in results if "error" in result]
    if errors:
        raise ConfigError(errors[0])
    return results[0]["counters"], signals.received


# How long a new elastic worker may take to answer its first call (see `_patient_first_answer`): a worker process
# started by Ray on a node busy with other work took 10 to 15 s here; a node that gives no answer in this time is
# reported as failed.
FIRST_ANSWER_S = 120.0
# The fixed wait of horovod.ray's elastic executor (Horovod 0.28.1, horovod/ray/elastic_v2.py) for that answer.
HOROVOD_FIRST_ANSWER_S = 10


class _PatientFirstAnswer:
    """The ray module as horovod.ray.elastic_v2 sees it, but for its wait for a new worker's first answer.

    horovod.ray's elastic executor calls every worker it creates once, with `ray.get(ping, timeout=10)`, and ends
    the job when the answer takes longer ("Ping failed - Get timed out"). A worker is a new process (Ray gives
    each actor its own: processes warmed by earlier tasks are not reused), which starts Python and imports ray
    and horovod.ray; with two training processes on this machine's 2 cores that took 10 to 15 s, and the test of
    an elastic Ray job ended before training on every try. The figure is fixed in Horovod's code (no setting
    reaches it), so the executor gets this stand-in for its module's `ray`, which waits FIRST_ANSWER_S where it
    asked for HOROVOD_FIRST_ANSWER_S and passes everything else through unchanged."""

    def __init__(self, ray):
        self._ray = ray

    def __getattr__(self, name):
        return getattr(self._ray, name)

    def get(self, refs, *args, timeout=None, **kwargs):
        if timeout == HOROVOD_FIRST_ANSWER_S:
            timeout = FIRST_ANSWER_S
        return self._ray.get(refs, *args, timeout=timeout, **kwargs)


def _patient_first_answer(ray) -> None:
    """Gives horovod.ray's elastic executor `_PatientFirstAnswer` as its `ray`."""
    from horovod.ray import elastic_v2

    if not isinstance(elastic_v2.ray, _PatientFirstAnswer):
        elastic_v2.ray = _PatientFirstAnswer(ray)


def _quiet_rendezvous_errors() -> None:
    """Horovod's elastic rendezvous server runs in this driver; when a worker dies while fetching from it,
    socketserver prints the broken pipe's traceback. That death is reported (one line, or a rollback), so the
    traceback says nothing more; it goes to the debug log instead."""
    from horovod.runner.http.http_server import RendezvousHTTPServer

    def handle_error(self, request, client_address):
        logging.debug("rendezvous request from %s failed: %s", client_address, sys.exc_info()[1])

    RendezvousHTTPServer.handle_error = handle_error


def _restore_ray_state_module(ray) -> None:
    """horovod.ray's elastic executor (Horovod 0.28.1, the last release) calls ray.state.current_node_id(),
    which Ray 2.x moved to ray._private.state; the function itself is unchanged, so the old name is given
    back to it."""
    if not hasattr(ray, "state"):
        import ray._private.state

        ray.state = ray._private.state


def main(argv) -> None:
    logging.set_verbosity(logging.WARNING)  # this driver's progress is rank 0's, forwarded by Ray
    if len(argv) > 1:
        COMMAND.fail(f"unexpected arguments {' '.join(argv[1:])}; every setting is a --flag (see --helpfull)")
    try:
        _check_ray_flags()
        config = config_from_flags(check_logdir_writable=True)
        counters, stopped_by = train_on_ray(config)
    except (ConfigError, CheckpointError) as error:
        COMMAND.fail(str(error))
    if stopped_by:
        print(f"{PROGRAM}: stopped by {stopped_by} at {counters['env_steps']:,} env steps on {FLAGS.num_workers} "
              f"Ray workers; logdir {config.logdir}. To continue, run the same command with --resume", flush=True)
        return
    print(f"{PROGRAM}: trained {counters['env_steps']:,} env steps, {counters['updates']:,} updates, "
          f"{counters['episodes']:,} episodes on {FLAGS.num_workers} Ray workers; logdir {config.logdir}",
          flush=True)


def run() -> None:
    """Console-script entry point."""
    COMMAND.run(main)


if __name__ == "__main__":
    sys.exit(run())
