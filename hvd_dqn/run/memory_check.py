"""The memory pre-flight: before any rank allocates its memory (a replay memory, or PQN's rollout), whether the
memories of the ranks on each host fit in what that host has available, so a job that cannot fit is refused in one
line at start-up instead of being killed by the kernel hours later, part-way through filling its memories.

A host needs, for each rank on it, the replay memory's bytes (computed without allocating it: the per-entry arrays
of the memory `make_replay_memory` would build, and the sum tree with prioritised replay) plus what the rank holds
of its own besides (rank_margin: TensorFlow's heap, the network, the emulators, the minibatches), and once for all
its ranks the file pages of the libraries they map (HOST_SHARED_BYTES), which the kernel keeps once per host however
many ranks map them. It has the smaller of the kernel's MemAvailable and the room left under its memory cgroup's
limit (a container's limit under Kubernetes, Slurm or Docker), read once every rank is built up to its replay
memory, plus the anonymous memory its ranks hold by then (which that reading has already lost). Above the available
memory: refused; above WARN_FRACTION of it: a warning."""
from __future__ import annotations

import os
from typing import Optional

from absl import logging

from hvd_dqn.config import ConfigError
from hvd_dqn.text import listed

GIB = 2**30
# Measured here with studies/rank_memory.py (results/memory/; 4 ranks over MPI, TensorFlow 2.18 on CPU with
# Horovod, the peak of each rank's private pages less the replay it had written): CartPole 0.30 GiB, MinAtar
# Breakout 0.33, Dopamine's Breakout preset 0.54 (its 8 emulators and frame minibatches); the libraries' file
# pages every rank maps, 0.39 GiB, are the host's once. The budgets leave a third or more above each.
RANK_MARGIN_ATARI_BYTES = 3 * GIB // 4
RANK_MARGIN_BYTES = GIB // 2
HOST_SHARED_BYTES = GIB // 2
WARN_FRACTION = 0.8


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


def rank_margin(config) -> int:
    """Bytes a rank holds of its own besides its replay memory: Atari's emulators and frame batches cost more."""
    from hvd_dqn.envs import atari_game

    return RANK_MARGIN_ATARI_BYTES if atari_game(config.env_id) else RANK_MARGIN_BYTES


def verdict(replay_per_rank: int, ranks_on_host: int, available: Optional[tuple], margin: int = RANK_MARGIN_BYTES):
    """("refuse" | "warn" | "ok", bytes needed on the host) for `ranks_on_host` ranks of `replay_per_rank` and
    `margin` bytes each, and the libraries they share once."""
    needed = ranks_on_host * (replay_per_rank + margin) + HOST_SHARED_BYTES
    if available is None:
        return "ok", needed
    if needed > available[0]:
        return "refuse", needed
    return ("warn" if needed > WARN_FRACTION * available[0] else "ok"), needed


def describe(config, replay_per_rank: int, ranks_on_host: int, needed: int, available: tuple, host: str) -> str:
    """The refusal or warning's text: the flag, the bytes needed and available, and what to change."""
    from hvd_dqn.agent.factory import memory_setting

    memory = memory_setting(config, ranks_on_host)
    own = (f"{rank_margin(config) / GIB:g} GiB for TensorFlow and the emulators) + "
           f"{HOST_SHARED_BYTES / GIB:g} GiB of libraries the ranks share")
    remedies = memory.remedies
    return (f"{memory.flag}: {memory.plural} need {needed / GIB:,.1f} GiB on {host} ({ranks_on_host} rank(s) x "
            f"({replay_per_rank / GIB:,.1f} GiB of {memory.name} + {own}) and {available[0] / GIB:,.1f} GiB is "
            f"available ({available[1]}); use "
            + listed(remedies, "or"))


def smaps_fields(smaps_rollup: str) -> dict:
    """The kB fields of a process's smaps_rollup (Rss, Private_Dirty, Anonymous, ...), in bytes; {} where it cannot
    be read (the process is gone, or not Linux)."""
    fields = {}
    try:
        with open(smaps_rollup) as handle:
            for line in handle:
                parts = line.split()
                if len(parts) == 3 and parts[2] == "kB" and parts[1].isdigit():
                    fields[parts[0].rstrip(":")] = int(parts[1]) * 1024
    except OSError:
        pass
    return fields


def held_bytes(smaps_rollup: str = "/proc/self/smaps_rollup") -> int:
    """Anonymous bytes this process holds now (its heap, TensorFlow's, the emulators'), 0 where unreadable: the
    check runs after the ranks have imported TensorFlow and built their envs, so MemAvailable has lost these
    already, and they are added back to it rather than counted twice (32 ranks' 8 GiB were)."""
    return smaps_fields(smaps_rollup).get("Anonymous", 0)


def host_room(readings) -> dict:
    """{host: (ranks read on it, (bytes its ranks can have in all, source) or None)} from every rank's (host,
    available_bytes(), held_bytes()): the host's lowest reading plus what its ranks hold already."""
    by_host = {}
    for host, available, held in readings:
        by_host.setdefault(host, []).append((available, held))
    rooms = {}
    for host, rows in by_host.items():
        readable = [available for available, _ in rows if available is not None]
        holding = sum(held for _, held in rows)
        if len(readable) < len(rows):  # nothing to go by on this host: no check, as with one rank
            rooms[host] = (len(rows), None)
            continue
        lowest, source = min(readable)
        if holding:
            source = f"{source} and the {holding / GIB:,.1f} GiB its ranks hold already"
        rooms[host] = (len(rows), (lowest + holding, source))
    return rooms


def check_memory_fits(config, spec, num_envs: int, capacity: int, world) -> None:
    """Collective (except under --elastic), before the agent's memory (a replay memory, or PQN's rollout) is
    allocated: every rank reads its host, and every rank learns every host's answer, so a job that does not fit
    stops on every rank at once (ConfigError, which rank 0 reports in one line) and rank 0 names the worst host;
    near the limit rank 0 warns."""
    from hvd_dqn import collectives
    from hvd_dqn.agent.factory import memory_bytes

    replay = memory_bytes(config, spec, num_envs, capacity)
    margin = rank_margin(config)
    if config.elastic:
        # A worker that joins builds its trainer while the others train: a collective here would wait for them
        # forever, so each rank answers for its own host, adding back only what it holds itself (the others on
        # its host may not have started yet). One that does not fit ends that worker.
        (_, available), = host_room([(world.hostname, available_bytes(), held_bytes())]).values()
        rooms = {world.hostname: (world.local_size, available)}
    else:
        collectives.barrier("memory_check_ready")  # every rank is built up to here: MemAvailable holds them all
        rooms = host_room(collectives.gather_objects((world.hostname, available_bytes(), held_bytes()),
                                                     "memory_check"))
    answers = [(*verdict(replay, ranks, available, margin), available, host, ranks)
               for host, (ranks, available) in rooms.items()]
    order = {"ok": 0, "warn": 1, "refuse": 2}
    worst = max(answers, key=lambda answer: (order[answer[0]], answer[1] / (answer[2][0] if answer[2] else 1)))
    status, needed, available, host, ranks_on_host = worst
    if status == "refuse":
        raise ConfigError(describe(config, replay, ranks_on_host, needed, available, host))
    if status == "warn" and world.is_chief:
        logging.warning("memory is tight (above %d%% of what is available): %s", round(100 * WARN_FRACTION),
                        describe(config, replay, ranks_on_host, needed, available, host))
