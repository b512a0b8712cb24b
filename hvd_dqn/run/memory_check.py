"""The memory pre-flight: before any rank allocates its replay memory, whether the memories of the ranks on
each host fit in what that host has available, so a job that cannot fit is refused in one line at start-up
instead of being killed by the kernel hours later, part-way through filling its memories.

A host needs, for each rank on it, the replay memory's bytes (computed without allocating it: the per-entry
arrays of the memory `make_replay_memory` would build, and the sum tree with prioritised replay) plus a margin
for TensorFlow, the emulators and the minibatches (PER_RANK_MARGIN_BYTES). It has the smaller of the kernel's
MemAvailable and the room left under its memory cgroup's limit (a container's limit under Kubernetes, Slurm or
Docker). Above the available memory: refused; above WARN_FRACTION of it: a warning.
"""
from __future__ import annotations

import os
from typing import Optional

from absl import logging

from hvd_dqn.config import ConfigError
from hvd_dqn.replay.sum_tree import SumTree

GIB = 2**30
# Measured here (peak resident memory of one-rank runs of 3,000 env steps whose replay memories held 14 MB at
# most; TensorFlow 2.18 on CPU with Horovod): CartPole 0.61 GiB, Atari smoke 0.77, Dopamine's Breakout preset
# 0.82. 1 GiB a rank leaves some room.
PER_RANK_MARGIN_BYTES = 1 * GIB
WARN_FRACTION = 0.8


def replay_bytes(config, spec, num_envs: int, capacity: int) -> int:
    """Bytes the replay memory of `capacity` transitions over `num_envs` envs will hold once allocated (PQN's
    rollout with --agent=pqn)."""
    import dataclasses

    if config.agent == "pqn":
        from hvd_dqn.replay.rollout import Rollout

        # A one-step rollout gives the bytes per transition; the arrays grow linearly with the steps.
        probe = Rollout(1, num_envs, spec.observation_shape, spec.observation_dtype)
        return probe.bytes_per_transition * config.rollout_steps * num_envs

    from hvd_dqn.run.learning_side import make_replay_memory

    # A small memory of the same kind gives the bytes per entry; the arrays grow linearly with the capacity.
    probe_capacity = num_envs * max(64, config.n_step + 8)
    probe = make_replay_memory(dataclasses.replace(config, prioritized_replay=False), spec, num_envs,
                               probe_capacity)
    per_entry = probe.bytes_per_transition
    segment = capacity // num_envs
    total = per_entry * segment * num_envs
    if config.prioritized_replay:
        total += SumTree.bytes_for(segment * num_envs)
    return int(total)


def available_bytes(meminfo: str = "/proc/meminfo", cgroup_root: str = "/sys/fs/cgroup") -> Optional[tuple]:
    """(bytes available to this process, where the figure comes from), or None where neither is readable."""
    found = []
    try:
        with open(meminfo) as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    found.append((int(line.split()[1]) * 1024, "MemAvailable"))
    except (OSError, ValueError, IndexError):
        pass
    room = _cgroup_room(cgroup_root)
    if room is not None:
        found.append((room, "the memory cgroup's limit"))
    return min(found) if found else None


def _cgroup_room(root: str) -> Optional[int]:
    """The memory cgroup's limit minus its usage (cgroup v2, then v1), or None where there is no limit."""
    for limit_file, usage_file in (("memory.max", "memory.current"),
                                   ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes")):
        try:
            with open(os.path.join(root, limit_file)) as handle:
                limit = handle.read().strip()
            with open(os.path.join(root, usage_file)) as handle:
                usage = int(handle.read().strip())
        except (OSError, ValueError):
            continue
        if limit == "max" or int(limit) >= 2**60:  # v1 writes "no limit" as a huge number
            return None
        return max(0, int(limit) - usage)
    return None


def verdict(replay_per_rank: int, ranks_on_host: int, available: Optional[tuple]):
    """("refuse" | "warn" | "ok", bytes needed on the host) for `ranks_on_host` ranks of `replay_per_rank`."""
    needed = ranks_on_host * (replay_per_rank + PER_RANK_MARGIN_BYTES)
    if available is None:
        return "ok", needed
    if needed > available[0]:
        return "refuse", needed
    return ("warn" if needed > WARN_FRACTION * available[0] else "ok"), needed


def describe(config, replay_per_rank: int, ranks_on_host: int, needed: int, available: tuple, host: str) -> str:
    """The refusal or warning's text: the flag, the bytes needed and available, and what to change."""
    if config.agent == "pqn":
        return (f"--rollout_steps={config.rollout_steps}: the rollouts need {needed / GIB:,.1f} GiB on {host} "
                f"({ranks_on_host} rank(s) x ({replay_per_rank / GIB:,.1f} GiB of rollout + "
                f"{PER_RANK_MARGIN_BYTES / GIB:g} GiB for TensorFlow and the emulators)) and "
                f"{available[0] / GIB:,.1f} GiB is available "
                f"({available[1]}); use fewer ranks per host, fewer --num_envs or fewer --rollout_steps")
    text = (f"--replay_capacity={config.replay_capacity}: the replay memories need {needed / GIB:,.1f} GiB on "
            f"{host} ({ranks_on_host} rank(s) x ({replay_per_rank / GIB:,.1f} GiB of replay + "
            f"{PER_RANK_MARGIN_BYTES / GIB:g} GiB for TensorFlow and the emulators)) and {available[0] / GIB:,.1f} "
            f"GiB is available ({available[1]})")
    remedies = ["fewer ranks per host"] if ranks_on_host > 1 else []
    if config.counts_per_rank and ranks_on_host > 1:
        remedies.append("--nocounts_per_rank (which splits --replay_capacity over the ranks)")
    remedies.append("a smaller --replay_capacity")
    return f"{text}; use " + (f"{', '.join(remedies[:-1])} or {remedies[-1]}" if len(remedies) > 1 else remedies[0])


def check_replay_fits(config, spec, num_envs: int, capacity: int, world) -> None:
    """Collective (except under --elastic), before the replay memory is allocated: every rank checks its host,
    and every rank learns every host's answer, so a job that does not fit stops on every rank at once
    (ConfigError, which rank 0 reports in one line) and rank 0 names the worst host; near the limit rank 0
    warns."""
    from hvd_dqn.run import distributed

    replay = replay_bytes(config, spec, num_envs, capacity)
    available = available_bytes()
    status, needed = verdict(replay, world.local_size, available)
    answer = (status, needed, available, world.hostname, world.local_size, replay)
    # Under --elastic a worker that joins builds its trainer while the others train: a collective here would
    # wait for them forever, so each rank answers for its own host (one that does not fit ends that worker).
    answers = [answer] if config.elastic else distributed.gather_objects(answer, "memory_check")
    order = {"ok": 0, "warn": 1, "refuse": 2}
    worst = max(answers, key=lambda answer: (order[answer[0]], answer[1] / (answer[2][0] if answer[2] else 1)))
    status, needed, available, host, ranks_on_host, replay = worst
    if status == "refuse":
        raise ConfigError(describe(config, replay, ranks_on_host, needed, available, host))
    if status == "warn" and world.is_chief:
        logging.warning("memory is tight (above %d%% of what is available): %s", round(100 * WARN_FRACTION),
                        describe(config, replay, ranks_on_host, needed, available, host))
