"""The ceiling a machine sets on N workers: N one-worker runs at once, each doing one rank's work of an N-worker
job (its envs, its replay memory, its batch, its target copies) on the cores that rank would be bound to, with
nothing linking them.

A synchronous job goes at the pace of its slowest rank, so N x the slowest lone run's env steps per second is
what N workers could reach here if exchanging gradients cost nothing. Against one worker, that is the ceiling
the cores themselves set (`hvd_dqn.measure.benchmark_workers --corun`). Where cores slow each other down when both are
busy (shared caches, memory bandwidth, a VM host's other guests) it falls below N before Horovod exchanges a
byte; the gap between it and the measured speed-up is what the exchange and the waiting cost.
"""
from __future__ import annotations

import os
import subprocess
from typing import List, Sequence

from hvd_dqn.config import TrainConfig
from hvd_dqn.rank_split import counts_are_per_rank, rank_learning_starts, rank_shape, rank_share


class CorunError(ValueError):
    """The job's rank cannot be imitated by a one-worker run."""


def rank_alone_flags(config: TrainConfig, workers: int, job_num_envs=None) -> List[str]:
    """hvd_dqn.train flags under which one worker does what one rank of a `workers`-rank job of `config` does:
    its share of the envs, replay and learning start, its minibatch and update frequency, and its target copies
    (the schedule the rank runs, divided by the ranks under --scale_schedules_by_workers)."""
    from hvd_dqn.rank_split import update_counted_schedules

    if counts_are_per_rank(config):
        flags = [f"--num_envs={job_num_envs // workers}"] if job_num_envs else []
    else:
        envs, capacity = rank_share(config, workers)
        flags = [f"--num_envs={envs}", f"--replay_capacity={capacity}",
                 f"--learning_starts={rank_learning_starts(config, workers)}"]
    if config.rank_scaling == "updates" and workers > 1:
        # The rank's minibatch and env steps per update, by the cost model's rule for the mode (1/N of the batch,
        # one update per F/N of its own env steps); envs do not change them, so one per rank stands in.
        shape = rank_shape(config.rank_scaling, workers, config.batch_size, config.train_frequency, workers)
        if shape.env_steps_per_update != int(shape.env_steps_per_update):
            raise CorunError(f"--rank_scaling=updates with --train_frequency={config.train_frequency}: a rank of "
                             f"{workers} updates every {config.train_frequency}/{workers} of its env steps, which "
                             "a one-worker run cannot; --corun needs a --train_frequency divisible by the workers")
        flags += [f"--batch_size={shape.batch_size}", f"--train_frequency={int(shape.env_steps_per_update)}"]
    flags.append(f"--target_update_period={update_counted_schedules(config, workers).target_update_period}")
    return flags


def core_blocks(available: Sequence[int], workers: int, cores_per_rank: int) -> List[List[int]]:
    """The cores each rank of a `workers`-rank job binds to (hvd_dqn.run.horovod_setup.cores_for_rank's blocks)."""
    from hvd_dqn.run.horovod_setup import cores_for_rank

    return [cores_for_rank(available, rank, workers, cores_per_rank) for rank in range(workers)]


def start_bound(command: Sequence[str], cores: Sequence[int], log_path: str, environment: dict) -> subprocess.Popen:
    """Starts `command` allowed onto `cores` only (its --cores_per_rank binding then takes exactly those), its
    output into `log_path`."""
    log = open(log_path, "w")
    try:
        return subprocess.Popen(list(command), stdout=log, stderr=subprocess.STDOUT, env=environment,
                                preexec_fn=lambda: os.sched_setaffinity(0, list(cores)))
    finally:
        log.close()  # the child holds its own copy of the descriptor


def ceiling(lone_rates: Sequence[float], base_rate: float) -> float:
    """N workers' speed-up over one worker (at `base_rate` env steps/s) if the exchange cost nothing: N x the
    slowest lone run's rate, the pace a synchronous job would keep."""
    return len(lone_rates) * min(lone_rates) / base_rate
