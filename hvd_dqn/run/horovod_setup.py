"""Horovod's start on this process: the rank a launcher gave it, the cores it binds to, its thread pools, one
GPU per local rank, and the job's description (the collectives live in hvd_dqn/collectives.py).

Set-up follows Horovod's TensorFlow 2 examples: initialise, pin one GPU per local rank with memory
growth, size the CPU thread pools to the cores this rank owns. Every collective here must be called by
all ranks in the same order, or the job hangs ("tensors submitted by a subset of ranks").

Horovod is imported inside the functions that use it: the training command imports this module to learn its
rank before it checks the flags, and importing horovod.tensorflow (which imports TensorFlow) takes 8-11 s
on these machines against 0.4 s for the whole answer to a bad flag.
"""
from __future__ import annotations

import dataclasses
import os
import socket
from typing import List, Optional, Sequence

import numpy as np

from hvd_dqn.collectives import gather_objects
from hvd_dqn.cpus import threads_per_rank

# Environment variables in which launchers publish the global rank before Horovod is initialised:
# horovodrun with Gloo, Open MPI (mpirun and horovodrun with MPI), MPICH/Intel MPI, Slurm's srun.
_RANK_VARIABLES = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")


def launcher_environment() -> dict:
    """This process's environment with what horovodrun's MPI launcher needs here, for tools that start
    training jobs (the scaling study, the worker benchmark): Open MPI refuses to start as root unless told it
    may (CI and containers run as root). Values already set win, as in scripts/launch_env.sh."""
    environment = dict(os.environ)
    if os.geteuid() == 0:
        environment.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        environment.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return environment


def launcher_rank() -> int:
    """This process's global rank as the launcher announced it, or 0 when started without a launcher.

    Used before `hvd.init()` so that only rank 0 prints configuration errors, and so that a rank can exit
    on a bad flag without first joining (and then blocking) the collective set-up.
    """
    return _launcher_count(_RANK_VARIABLES) or 0


@dataclasses.dataclass(frozen=True)
class World:
    """Where this process sits in the job."""

    rank: int
    size: int
    local_rank: int
    local_size: int
    hostname: str
    controller: str  # "MPI" or "Gloo"

    @property
    def is_chief(self) -> bool:
        """Rank 0 alone writes shared files (checkpoints, metrics, TensorBoard) and prints progress."""
        return self.rank == 0


_SIZE_VARIABLES = ("HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
_LOCAL_SIZE_VARIABLES = ("HOROVOD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE")


def _launcher_count(variables) -> Optional[int]:
    """The first of the launchers' `variables` set to a number, or None."""
    for variable in variables:
        value = os.environ.get(variable)
        if value is not None and value.isdigit():
            return int(value)
    return None


def runtime_defaults(world_size: int, local_size: Optional[int]) -> dict:
    """Horovod's and Open MPI's run-time settings for a job of `world_size` ranks, `local_size` of them on this
    host (None: unknown), applied where the user (or horovodrun's --cycle-time-ms) set none. Chosen for DQN's
    small, frequent allreduces, one per update (CartPole, ranks bound to a core each, over MPI;
    results/throughput/README.md):
    - Open MPI's progress engine yields the core while it waits for the other rank (what it does by itself
      when oversubscribed), so Horovod's thread and the rank's own share its core.
    - Horovod's background thread coordinates the ranks once per cycle (default 1 ms). Several ranks on one
      host: no cycle at all (0), so an update's allreduce starts as soon as every rank has queued it; with
      yielding, the coordination's wait gives the core back to the rank's own thread. Swept at
      2 ranks: 2 ms 1,210 env steps/s, 1 ms 1,151, 0.5 ms 1,458, 0.25 ms 1,698, 0.1 ms 1,748-1,858, 0
      1,921-2,024 (one rank alone: about 1,050-1,100). One rank keeps 2 ms: with no other rank to wait for, a
      0 cycle spins on the rank's core (646 env steps/s). Ranks on several hosts keep 2 ms too: 0 would keep
      the network busy with coordination rounds, and nothing here measured it."""
    one_host = local_size is None or local_size == world_size
    cycle_ms = "0" if world_size > 1 and one_host else "2"
    return {"HOROVOD_CYCLE_TIME": cycle_ms, "OMPI_MCA_mpi_yield_when_idle": "1"}


class BindingError(ValueError):
    """--cores_per_rank asks for more cores than this rank's host lets its process use."""


def cores_for_rank(available: Sequence[int], local_rank: int, local_size: int, cores_per_rank: int) -> List[int]:
    """The cores a rank binds to under --cores_per_rank: of the cores its process may use (`available`), the
    `local_rank`-th block of `cores_per_rank` consecutive ones, so the ranks of a host never share a core.
    A process the launcher already bound to exactly that many cores (mpirun --bind-to core) keeps them."""
    cores = sorted(available)
    if len(cores) == cores_per_rank:
        return cores
    if len(cores) < local_size * cores_per_rank:
        raise BindingError(f"--cores_per_rank={cores_per_rank}: {local_size} rank(s) on this host need "
                           f"{local_size * cores_per_rank} cores, but this process may use {len(cores)} "
                           f"({','.join(map(str, cores))}); use fewer ranks per host or fewer cores per rank")
    return cores[local_rank * cores_per_rank:(local_rank + 1) * cores_per_rank]


def bind_to_cores(cores: Sequence[int]) -> None:
    """Binds every thread this process has (Horovod's background thread and the MPI or Gloo threads among
    them) and every thread it starts later (TensorFlow's pools, the emulators') to `cores`."""
    for thread_id in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(thread_id), cores)
        except ProcessLookupError:  # the thread ended meanwhile
            pass


def init_horovod(intra_op_threads: int = 0, inter_op_threads: int = 1, deterministic_ops: bool = False,
                 cores_per_rank: int = 0) -> World:
    """Initialises Horovod and TensorFlow's devices and threads for this rank; returns the World.

    intra_op_threads=0 gives each rank an equal share of the CPUs its process may use (`hvd_dqn.cpus`: its
    affinity mask and cgroup quota, or its Slurm allocation; bound by `cores_per_rank`, its own cores), so N ranks
    on one host do not each start a thread per core and oversubscribe the CPU.
    """
    import horovod.tensorflow as hvd
    import tensorflow as tf

    # Read by Horovod and Open MPI when hvd.init() starts them, so from the launcher's variables.
    defaults = runtime_defaults(_launcher_count(_SIZE_VARIABLES) or 1, _launcher_count(_LOCAL_SIZE_VARIABLES))
    for name, value in defaults.items():
        os.environ.setdefault(name, value)
    hvd.init()
    if cores_per_rank:  # before TensorFlow starts its thread pools, which inherit the binding
        bind_to_cores(cores_for_rank(os.sched_getaffinity(0), hvd.local_rank(), hvd.local_size(), cores_per_rank))
    # Horovod: pin one GPU per local rank, with memory growth so ranks do not reserve each other's memory.
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.set_visible_devices(gpus[hvd.local_rank() % len(gpus)], "GPU")
    if intra_op_threads == 0:
        intra_op_threads = cores_per_rank or threads_per_rank(hvd.local_size())
    # TensorFlow refuses to change its pools once it has started; setting the values they have is harmless
    # (the benchmark initialises before it builds a Trainer, which initialises again).
    if tf.config.threading.get_intra_op_parallelism_threads() != intra_op_threads:
        tf.config.threading.set_intra_op_parallelism_threads(intra_op_threads)
    if tf.config.threading.get_inter_op_parallelism_threads() != inter_op_threads:
        tf.config.threading.set_inter_op_parallelism_threads(inter_op_threads)
    if deterministic_ops:
        tf.config.experimental.enable_op_determinism()
    return current_world()


def current_world() -> World:
    """Where this process sits now. Under Horovod Elastic the answer changes after each reset (a worker
    lost or joined): ranks are renumbered and the size changes, so the trainer asks again then."""
    import horovod.tensorflow as hvd

    return World(
        rank=hvd.rank(),
        size=hvd.size(),
        local_rank=hvd.local_rank(),
        local_size=hvd.local_size(),
        # horovodrun's Gloo launcher names each host as given in -H; other launchers leave the real name.
        hostname=os.environ.get("HOROVOD_HOSTNAME") or socket.gethostname(),
        controller="MPI" if hvd.mpi_enabled() else "Gloo",
    )


def describe_world(world: World) -> str:
    """Collective: a multi-line description of the job (hosts, ranks, local ranks, controller, collectives)
    built from what every rank reports about itself. Every rank must call it; all get the same text."""
    import horovod.tensorflow as hvd

    import tensorflow as tf

    threads = tf.config.threading.get_intra_op_parallelism_threads()
    places = gather_objects((world.rank, world.hostname, world.local_rank, os.getpid(),
                             f"{cores_text()} ({threads} TensorFlow thread{'s' if threads != 1 else ''})"),
                            "world_places")
    hosts = {}
    for rank, hostname, local_rank, pid, _ in places:
        hosts.setdefault(hostname, []).append(f"rank {rank} (local rank {local_rank}, pid {pid})")
    built = {"MPI": hvd.mpi_built(), "Gloo": hvd.gloo_built(), "NCCL": hvd.nccl_built(),
             "oneCCL": hvd.ccl_built(), "DDL": hvd.ddl_built()}
    lines = [f"world: {world.size} ranks on {len(hosts)} host(s), controller {world.controller}, Horovod cycle "
             f"{os.environ.get('HOROVOD_CYCLE_TIME', '1')} ms; "
             f"collectives built: {', '.join(name for name, yes in built.items() if yes) or 'none'}"]
    lines += [f"  {hostname}: {'; '.join(ranks)}" for hostname, ranks in hosts.items()]
    # Which cores each rank's threads may run on: its own block under --cores_per_rank (or a launcher's binding),
    # else every core of its host, shared with the host's other ranks; and how many threads its ops may use.
    lines.append("  cores: " + "; ".join(f"rank {rank} on {cores}" for rank, _, _, _, cores in places))
    return "\n".join(lines)


def cores_text() -> str:
    """The cores this process may run on, as ranges: "0-3", "1", "0,2"."""
    cores, ranges = sorted(os.sched_getaffinity(0)), []
    for core in cores:
        if ranges and core == ranges[-1][1] + 1:
            ranges[-1][1] = core
        else:
            ranges.append([core, core])
    return ",".join(str(first) if first == last else f"{first}-{last}" for first, last in ranges)

