"""The parts of a hardware profile (hvd_dqn/plan/hardware_profiles.py), timed on this process's device for one
preset, in alternating rounds (`python -m hvd_dqn.plan.calibrate` writes the profile from them): the emulators,
the forward pass and the acting path by envs; the update on the device and from host memory, and a minibatch's
draw, by batch size; the copy of a batch to the device."""
from __future__ import annotations

import dataclasses
import os

import numpy as np


def measure_parts(config, env_counts, batch_sizes, seconds: float, rounds: int, replay_rows: int) -> dict:
    """Every single-process part, timed in alternating rounds on this process's device."""
    import tensorflow as tf

    from hvd_dqn.agent.factory import greedy_network, online_network
    from hvd_dqn.rank_split import learns_from_replay
    from hvd_dqn.agent.base import act_and_store
    from hvd_dqn.agent.policy import EpsilonGreedyActor
    from hvd_dqn.envs import env_seeds, make_env_for, probe_spec
    from hvd_dqn.measure.timing import side_by_side

    tf.keras.utils.set_random_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    cores = len(os.sched_getaffinity(0))
    spec = probe_spec(config)
    observation_bytes = int(np.prod(spec.observation_shape)) * np.dtype(spec.observation_dtype).itemsize
    online = online_network(config, spec)
    actor = EpsilonGreedyActor(greedy_network(config, online), spec.num_actions, rng)
    steps, closers = {}, []

    def observations(count):
        return rng.integers(0, 256, size=(count, *spec.observation_shape)).astype(spec.observation_dtype)

    for num_envs in env_counts:
        threaded = config.replace(env_threads=min(num_envs, cores))
        raw_env, acting_env = make_env_for(threaded, num_envs), make_env_for(threaded, num_envs)
        closers += [raw_env.close, acting_env.close]
        raw_env.reset(seed=env_seeds(config.seed, num_envs))
        memory = _memory(config, spec, num_envs, replay_rows)
        state = {"observation": acting_env.reset(seed=env_seeds(config.seed + 1, num_envs))[0]}
        batch = observations(num_envs)

        def raw(env=raw_env, count=num_envs):
            env.step(rng.integers(0, spec.num_actions, size=count))
            return 1

        def forward(batch=batch):
            actor.greedy_actions(batch)
            return 1

        def acting(env=acting_env, memory=memory, state=state):
            state["observation"], _, _ = act_and_store(env, actor, memory, state["observation"], config.epsilon_end,
                                                       config.clip_rewards, config.terminal_on_life_loss)
            return 1

        forward(), acting()  # trace the inference for this many envs outside the timing
        steps.update({f"emulators_{num_envs}": raw, f"forward_{num_envs}": forward, f"acting_{num_envs}": acting})

    if learns_from_replay(config):
        steps.update(_dqn_update_steps(config, spec, online, batch_sizes, rng, replay_rows))
    else:
        steps.update(_pqn_update_steps(config, spec, online, batch_sizes, observations, rng))
    copy_batch = observations(max(batch_sizes))

    def copy():
        tf.identity(copy_batch)[0, 0].numpy()  # to the device; only one element comes back
        return 1

    steps["copy"] = copy
    rates = side_by_side(steps, seconds, rounds)
    for close in closers:
        close()
    ms = {name: 1000.0 / value for name, value in rates.items()}
    parts = {"observation_bytes": observation_bytes, "observations_per_sample": 2 if learns_from_replay(config) else 1,
             "emulator_steps_per_s": {e: e * rates[f"emulators_{e}"] for e in env_counts},
             "forward_ms": {e: ms[f"forward_{e}"] for e in env_counts},
             "acting_ms": {e: ms[f"acting_{e}"] for e in env_counts},
             "copy_bytes_per_s": copy_batch.nbytes * rates["copy"]}
    for table in ("update_device_ms", "update_host_ms", "pqn_update_device_ms", "gather_ms"):
        parts[table] = {b: ms[f"{table}_{b}"] for b in batch_sizes if f"{table}_{b}" in ms}
    return parts


def _memory(config, spec, num_envs: int, replay_rows: int):
    from hvd_dqn.agent.factory import replay_memory

    return replay_memory(config, spec, num_envs, min(config.replay_capacity, replay_rows))


def _dqn_update_steps(config, spec, online, batch_sizes, rng, replay_rows: int) -> dict:
    """The preset's update from host memory (NumPy batches), on the device (the same batches as tensors there),
    and the minibatch's draw from a full memory of up to `replay_rows` transitions."""
    import tensorflow as tf

    from hvd_dqn.agent.factory import replay_learner
    from hvd_dqn.measure.training_modes import fill_replay

    memory = _memory(config, spec, config.num_envs, replay_rows)  # a rank's envs: the memory's layout follows them
    fill_replay(memory, spec, config.num_envs, rng)
    learner = replay_learner(config, spec, online=online)
    steps = {}
    for batch_size in batch_sizes:
        host = memory.sample(batch_size, rng, config.priority_beta_start)
        device = dataclasses.replace(host, **{field.name: tf.identity(tf.convert_to_tensor(value))
                                              for field in dataclasses.fields(host)
                                              if isinstance(value := getattr(host, field.name), np.ndarray)})

        def update(batch):
            learner.update(batch)
            return 1

        def draw(batch_size=batch_size):
            memory.sample(batch_size, rng, config.priority_beta_start)
            return 1

        update(host), update(device)  # trace both outside the timing
        steps.update({f"update_host_ms_{batch_size}": lambda host=host: update(host),
                      f"update_device_ms_{batch_size}": lambda device=device: update(device),
                      f"gather_ms_{batch_size}": draw})
    return steps


def _pqn_update_steps(config, spec, online, batch_sizes, observations, rng) -> dict:
    """PQN's minibatch update with the minibatch on the device, and a minibatch's gather from a host rollout of
    the preset's size."""
    import tensorflow as tf

    from hvd_dqn.agent.factory import rollout_learner

    learner = rollout_learner(config, online, 1, distributed=False)
    rollout = observations(max(config.num_envs * config.rollout_steps, *batch_sizes))
    steps = {}
    for batch_size in batch_sizes:
        batch = (tf.identity(tf.convert_to_tensor(rollout[:batch_size])),
                 tf.constant(rng.integers(0, spec.num_actions, batch_size), tf.int32),
                 tf.constant(rng.normal(size=batch_size), tf.float32))

        def update(batch=batch):
            learner.update(*batch)
            return 1

        def gather(batch_size=batch_size):
            rollout[rng.permutation(len(rollout))[:batch_size]].shape  # noqa: B018 (the gather is the work)
            return 1

        update()  # trace outside the timing
        steps.update({f"pqn_update_device_ms_{batch_size}": update, f"gather_ms_{batch_size}": gather})
    return steps
