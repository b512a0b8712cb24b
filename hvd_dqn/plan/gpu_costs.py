"""One GPU rank's work from a hardware profile (hvd_dqn/plan/hardware_profiles.py): acting per vector step, an
update from the host replay or rollout, the plain loops a profile was measured with, and the fit of the three host
costs to those loops. `hvd_dqn.plan.cost_formula` builds the GPU jobs' rows from these."""
from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Tuple

from hvd_dqn.plan.hardware_profiles import HardwareProfile, Loop, ProfileError


def table_value(table: Dict[int, float], size: float, beyond: str) -> float:
    """A table's value at `size`, interpolated on log-log axes between its entries; below the smallest entry the
    smallest entry's value (a GPU's step is bound by its kernel launches there, so it does not shrink with the
    batch); above the largest, `beyond`: "proportional" (cost grows with the size, as it does once the device
    is full) or "flat" (a rate that no longer grows: the emulators once every core is busy)."""
    if not table:
        raise ProfileError("an empty table")
    keys = sorted(table)
    if size <= keys[0]:
        return table[keys[0]]
    if size >= keys[-1]:
        return table[keys[-1]] * (size / keys[-1] if beyond == "proportional" else 1.0)
    upper = next(index for index, key in enumerate(keys) if key >= size)
    low, high = keys[upper - 1], keys[upper]
    fraction = (math.log(size) - math.log(low)) / (math.log(high) - math.log(low))
    return table[low] * (table[high] / table[low]) ** fraction


def acting_ms(profile: HardwareProfile, num_envs: int) -> float:
    """One vector step of `num_envs` envs: the forward pass (per call), the emulators, the host's fixed cost
    per call and its cost per agent step."""
    forward = table_value(profile.forward_ms, num_envs, "proportional") if profile.forward_ms else 0.0
    emulators = (1000.0 * num_envs / table_value(profile.emulator_steps_per_s, num_envs, "flat")
                 if profile.emulator_steps_per_s else 0.0)
    return forward + emulators + profile.host_call_ms + num_envs * profile.host_store_ms


def gather_ms(profile: HardwareProfile, batch_bytes: float) -> float:
    """Drawing a batch of `batch_bytes` from host memory."""
    return profile.host_draw_ms + batch_bytes * profile.host_gather_ns_per_byte * 1e-6


def dqn_update_ms(profile: HardwareProfile, batch_size: int, observation_bytes: int) -> float:
    """One DQN update from a host replay: gathered (two observations per sample), shipped, stepped."""
    if not profile.update_host_ms:
        raise ProfileError(f"profile {profile.name!r} has no DQN update figures (update_host_ms)")
    return (table_value(profile.update_host_ms, batch_size, "proportional")
            + gather_ms(profile, 2 * batch_size * observation_bytes))


def device_ms_per_sample(profile: HardwareProfile) -> float:
    """What one more sample adds to a DQN update once the device is full: the slope of update_device_ms between
    its two largest batches (on the H200, 1,024 to 2,048: 1.1 microseconds per sample)."""
    table = profile.update_device_ms
    if len(table) < 2:
        raise ProfileError(f"profile {profile.name!r} has fewer than two DQN update figures with the batch on the "
                           "device (update_device_ms): another agent's update cannot be scaled from DQN's")
    low, high = sorted(table)[-2:]
    slope = (table[high] - table[low]) / (high - low)
    if slope <= 0:
        raise ProfileError(f"profile {profile.name!r}: its DQN update does not grow from batch {low} to {high} "
                           "(update_device_ms), so its cost per sample is unknown")
    return slope


def agent_extra_ms(profile: HardwareProfile, batch_size: int, update_cost_ratio: float) -> float:
    """What an agent whose update does `update_cost_ratio` times the arithmetic of the update the profile timed
    (plain DQN's in the built-in profiles; QR-DQN's quantiles, IQN's sampled levels through the last layers are
    more) adds to that measured update: its extra samples' worth of work at the full device's cost per sample.
    Launches, the copy and the gather are the timed update's: the agents share the torso, the batch and the
    replay. An agent that costs no more than the timed update costs what it does."""
    return max(0.0, update_cost_ratio - 1.0) * batch_size * device_ms_per_sample(profile)


def pqn_update_ms(profile: HardwareProfile, batch_size: int, observation_bytes: int) -> float:
    """One PQN minibatch update from a host rollout: gathered (one observation per sample), copied, stepped."""
    if not profile.pqn_update_device_ms or not profile.copy_bytes_per_s:
        raise ProfileError(f"profile {profile.name!r} has no PQN update figures (pqn_update_device_ms and "
                           "copy_bytes_per_s)")
    batch_bytes = batch_size * observation_bytes
    return (table_value(profile.pqn_update_device_ms, batch_size, "proportional")
            + 1000.0 * batch_bytes / profile.copy_bytes_per_s + gather_ms(profile, batch_bytes))


def _learns_from_replay(loop: Loop) -> bool:
    """Whether a measured loop's agent learns from a replay memory (a minibatch every few vector steps), as its
    registry entry says, rather than from rollouts."""
    from hvd_dqn.agent import registry

    return registry.entry(loop.agent).memory == "replay"


def loop_agent_steps_per_s(profile: HardwareProfile, loop: Loop, observation_bytes: int) -> float:
    """A plain loop's agent steps per second, acting and learning one after the other."""
    if _learns_from_replay(loop):
        ms = acting_ms(profile, loop.num_envs) + loop.updates_per_vector_step * dqn_update_ms(
            profile, loop.batch_size, observation_bytes)
        return 1000.0 * loop.num_envs / ms
    ms = (loop.rollout_steps * acting_ms(profile, loop.num_envs)
          + loop.updates_per_rollout * pqn_update_ms(profile, loop.batch_size, observation_bytes))
    return 1000.0 * loop.num_envs * loop.rollout_steps / ms


ATARI_OBSERVATION_BYTES = 84 * 84 * 4  # a stack of four 84x84 uint8 frames


def validation_rows(profile: HardwareProfile, observation_bytes: int = ATARI_OBSERVATION_BYTES) -> List[dict]:
    """Each measured loop of the profile beside the model's agent steps/s from its parts, and the error."""
    rows = []
    for loop in profile.loops:
        predicted = loop_agent_steps_per_s(profile, loop, observation_bytes)
        rows.append(dict(loop=loop.label or f"{loop.agent} {loop.num_envs} envs, batch {loop.batch_size}",
                         measured=loop.agent_steps_per_s, predicted=round(predicted, 1),
                         error=round(predicted / loop.agent_steps_per_s - 1.0, 3)))
    return rows


def fit_host_costs(profile: HardwareProfile, loops=None,
                   observation_bytes: int = ATARI_OBSERVATION_BYTES) -> Tuple[float, float, float]:
    """The three host costs (ms per vector step, ms per agent step, ns per gathered byte; no cost per batch) that
    make the model's loops closest to the measured ones, as least squares on the relative error: the time of an
    agent step is linear in them, so the fit is one linear solve. Returns them unrounded."""
    import numpy as np

    bare = dataclasses.replace(profile, host_call_ms=0.0, host_store_ms=0.0, host_gather_ns_per_byte=0.0,
                               host_draw_ms=0.0)
    rows, targets = [], []
    for loop in loops if loops is not None else profile.loops:
        measured_ms = 1000.0 / loop.agent_steps_per_s  # per agent step
        parts_ms = 1000.0 / loop_agent_steps_per_s(bare, loop, observation_bytes)
        if _learns_from_replay(loop):
            bytes_per_step = loop.updates_per_vector_step * 2 * loop.batch_size * observation_bytes / loop.num_envs
        else:
            bytes_per_step = (loop.updates_per_rollout * loop.batch_size * observation_bytes
                              / (loop.num_envs * loop.rollout_steps))
        rows.append([1.0 / loop.num_envs / measured_ms, 1.0 / measured_ms, bytes_per_step * 1e-6 / measured_ms])
        targets.append((measured_ms - parts_ms) / measured_ms)
    if len(rows) < 3:
        raise ProfileError(f"profile {profile.name!r}: fitting three host costs needs at least three loops")
    solution = np.linalg.lstsq(np.array(rows), np.array(targets), rcond=None)[0]
    return tuple(float(value) for value in solution)
