"""The pipeline's stages on one process, each against its comparison: the emulators and the acting path, the
replay memory's sampling against a bare gather, the update against plain Keras, the exported policy; and the
trainer's full iteration (hvd_dqn.measure.training_modes) at the preset's replay ratio and the balanced one."""
from __future__ import annotations

import os

import numpy as np

from hvd_dqn.measure.timing import rename, side_by_side
from hvd_dqn.measure.training_modes import fill_replay, training_mode_rates


def stage_rates(config, seconds: float, rounds: int, argv, full_training: bool = True) -> dict:
    """Every single-process figure of `python -m hvd_dqn.measure.benchmark` (its docstring lists them) for `config`;
    `argv`: the benchmark's own command line, which the full-training child process is started with;
    full_training=False: the stages alone, without the trainers' figures."""
    import tensorflow as tf

    from hvd_dqn.agent.factory import greedy_network, online_network, replay_learner, replay_memory
    from hvd_dqn.agent.base import act_and_store
    from hvd_dqn.agent.policy import EpsilonGreedyActor
    from hvd_dqn.envs import env_seeds, make_env_for, spec_of

    tf.keras.utils.set_random_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    results = {"env_id": config.env_id, "num_envs": config.num_envs, "batch_size": config.batch_size,
               "cores": os.cpu_count(), "round_seconds": seconds, "rounds": rounds}

    # --- acting: the raw emulators, then the project's acting path over the same envs --------------------
    single_thread = config.replace(env_threads=1)
    raw_env, acting_env = make_env_for(single_thread, config.num_envs), make_env_for(single_thread, config.num_envs)
    spec = spec_of(raw_env)
    online = online_network(config, spec)
    actor = EpsilonGreedyActor(greedy_network(config, online), spec.num_actions, rng)
    acting_replay = replay_memory(config, spec, config.num_envs, config.replay_capacity)
    raw_env.reset(seed=env_seeds(config.seed, config.num_envs))
    state = {"observation": acting_env.reset(seed=env_seeds(config.seed + 1, config.num_envs))[0]}

    def raw_step():
        raw_env.step(rng.integers(0, spec.num_actions, size=config.num_envs))
        return config.num_envs

    def actor_step():
        state["observation"], _, _ = act_and_store(acting_env, actor, acting_replay, state["observation"],
                                                   config.epsilon_end, config.clip_rewards,
                                                   config.terminal_on_life_loss)
        return config.num_envs

    actor_step()  # traces the inference function outside the timing
    results.update(rename(side_by_side({"raw": raw_step, "actor": actor_step}, seconds, rounds),
                           raw="env_raw_steps_per_s", actor="actor_steps_per_s"))
    raw_env.close()
    acting_env.close()

    # --- the replay memory: a full one of the preset's size against a bare gather -------------------------
    replay = replay_memory(config, spec, config.num_envs, config.replay_capacity)
    fill_replay(replay, spec, config.num_envs, rng)
    results["replay_bytes_per_transition"] = replay.bytes_per_transition
    rows = replay.capacity
    if hasattr(replay, "stack"):  # frames: B x (stack + 1) random frames from an array of the memory's size
        bare = np.zeros((rows,) + spec.observation_shape[1:], dtype=np.uint8)
        per_sample = replay.stack + 1
    else:  # vectors: B random s_t and B random s_t+1 rows
        bare = np.zeros((rows,) + spec.observation_shape, dtype=np.float32)
        per_sample = 2
    bare[:] = rng.integers(0, 255, size=bare.shape[:1] + (1,) * (bare.ndim - 1))

    def sample_step():
        replay.sample(config.batch_size, rng)
        return 1

    def bare_step():
        bare[rng.integers(0, rows, size=(config.batch_size, per_sample))]  # noqa: B018 (the gather is the work)
        return 1

    results.update(rename(side_by_side({"sample": sample_step, "bare": bare_step}, seconds, rounds),
                           sample="replay_sample_batches_per_s", bare="bare_gather_batches_per_s"))

    # --- the learner: the project's update against the same update on Keras' own optimizer --------------------
    # The agent's update with Adam at a constant step size, through Horovod's DistributedOptimizer (at one rank),
    # and the same loss and networks stepped by Keras' own Adam: what the distributed wrapper costs on one rank.
    adam = config.replace(optimizer="adam", layer_adaptation=False, learning_rate_end=None,
                          lr_decay_updates=0, mixed_precision=False, fp16_allreduce=False, xla=False)
    learner = replay_learner(adam, spec, online=online)
    plain = replay_learner(adam, spec, distributed=False)
    batch = replay.sample(config.batch_size, rng)

    def learner_step():
        learner.update(batch)
        return 1

    def plain_step():
        plain.update(batch)
        return 1

    learner_step(), plain_step()  # trace both outside the timing
    results.update(rename(side_by_side({"learner": learner_step, "plain": plain_step}, seconds, rounds),
                           learner="learner_updates_per_s", plain="plain_tf_updates_per_s"))
    results["learner_vs_plain_tf"] = results["learner_updates_per_s"] / results["plain_tf_updates_per_s"]
    del replay, acting_replay  # free their memory before the trainers fill theirs

    # --- serving: the exported SavedModel's greedy actions, per batch size --------------------------------
    results.update(exported_policy_rates(greedy_network(config, online), spec, rng, seconds, rounds))

    results["replay_sample_vs_bare_gather"] = (results["replay_sample_batches_per_s"]
                                               / results["bare_gather_batches_per_s"])
    if not full_training:
        return results

    # --- full training, at the preset's replay ratio and at the balanced one --------------------------------
    # One update per `balanced` env steps makes the learner's capacity (updates/s x env steps per update) equal
    # acting's; there, and only there, any idle side is lost time the pipeline can win back.
    acting_rate, update_rate = results["actor_steps_per_s"], results["learner_updates_per_s"]
    balanced = max(1, round(acting_rate / update_rate))
    results["balanced_train_frequency"] = balanced
    results.update(training_mode_rates(argv, balanced, seconds, rounds))
    results["overlap_speedup"] = results["train_steps_per_s"] / results["train_steps_per_s_no_overlap"]
    slower_stage = min(acting_rate, update_rate * config.train_frequency)
    results["overlap_efficiency"] = results["train_steps_per_s"] / slower_stage
    results["overlap_efficiency_per_step"] = results["train_steps_per_s_overlap"] / slower_stage
    results["balanced_efficiency"] = results["balanced_steps_per_s"] / min(acting_rate, update_rate * balanced)
    results["balanced_speedup"] = results["balanced_steps_per_s"] / results["balanced_steps_per_s_in_order"]
    return results


POLICY_BATCH_SIZES = (1, 32, 256)


def exported_policy_rates(online, spec, rng: np.random.Generator, seconds: float, rounds: int) -> dict:
    """Actions per second of the greedy policy as `python -m hvd_dqn.export` writes it (SavedModel, loaded back,
    its serving signature called), at each of POLICY_BATCH_SIZES observations per call."""
    import tempfile

    import tensorflow as tf

    from hvd_dqn.agent.serving import save_greedy_policy

    with tempfile.TemporaryDirectory(prefix="hvd_dqn_policy_") as folder:
        save_greedy_policy(online, spec.observation_shape, tf.as_dtype(spec.observation_dtype), folder)
        serve = tf.saved_model.load(folder).signatures["serving_default"]
    steps = {}
    for batch in POLICY_BATCH_SIZES:
        shape = (batch, *spec.observation_shape)
        if np.dtype(spec.observation_dtype) == np.uint8:
            observation = rng.integers(0, 256, size=shape, dtype=np.uint8)
        elif np.dtype(spec.observation_dtype) == np.bool_:
            observation = rng.random(shape) < 0.5
        else:
            observation = rng.normal(size=shape).astype(spec.observation_dtype)
        observation = tf.constant(observation)

        def step(observation=observation, batch=batch):
            serve(observation=observation)["actions"].numpy()  # .numpy(): the actions reach the caller
            return batch

        step()  # the first call of each shape outside the timing
        steps[f"policy_actions_per_s_batch{batch}"] = step
    return side_by_side(steps, seconds, rounds)


def cost_model_costs(config, env_counts, batch_sizes, seconds: float, rounds: int,
                     replay_rows: int = 50_000) -> dict:
    """The cost model's per-rank costs on this process (hvd_dqn.plan.cost_formula): t_act(e), seconds per env
    step of the acting path with e envs, for each of `env_counts`, and t_learn(b), seconds per update as a
    rank makes it alone (a minibatch of b drawn from a full memory, the gradient step with the config's
    optimizer, new priorities under prioritised replay), for each of `batch_sizes`. Medians of alternating
    rounds."""
    import tensorflow as tf

    from hvd_dqn.agent.factory import greedy_network, online_network, replay_learner, replay_memory
    from hvd_dqn.agent.base import act_and_store
    from hvd_dqn.agent.policy import EpsilonGreedyActor
    from hvd_dqn.envs import env_seeds, make_env_for, probe_spec

    tf.keras.utils.set_random_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    single_thread = config.replace(env_threads=1)
    spec = probe_spec(config)
    online = online_network(config, spec)
    actor = EpsilonGreedyActor(greedy_network(config, online), spec.num_actions, rng)

    acting = {}
    for num_envs in env_counts:
        env = make_env_for(single_thread, num_envs)
        replay = replay_memory(config, spec, num_envs, min(config.replay_capacity, replay_rows))
        state = {"observation": env.reset(seed=env_seeds(config.seed, num_envs))[0]}

        def actor_step(env=env, replay=replay, state=state, num_envs=num_envs):
            state["observation"], _, _ = act_and_store(env, actor, replay, state["observation"], config.epsilon_end,
                                                       config.clip_rewards, config.terminal_on_life_loss)
            return num_envs

        actor_step()  # traces the inference for this number of envs outside the timing
        acting[num_envs] = (actor_step, env)

    replay = replay_memory(config, spec, 1, min(config.replay_capacity, replay_rows))
    fill_replay(replay, spec, 1, rng)
    learner = replay_learner(config, spec, online=online)  # the update as one worker's trainer makes it
    learning = {}
    for batch_size in batch_sizes:
        def learn_step(batch_size=batch_size):
            batch = replay.sample(batch_size, rng, config.priority_beta_start)
            metrics = learner.update(batch)
            if batch.indices is not None:
                replay.update_priorities(batch.indices, metrics["td_errors"])
            return 1

        learn_step()  # traces the update for this batch size outside the timing
        learning[batch_size] = learn_step

    steps = {f"act_{num_envs}": step for num_envs, (step, _) in acting.items()}
    steps.update({f"learn_{batch_size}": step for batch_size, step in learning.items()})
    rates = side_by_side(steps, seconds, rounds)
    for _, env in acting.values():
        env.close()
    return {"act_s": {num_envs: 1.0 / rates[f"act_{num_envs}"] for num_envs in env_counts},
            "learn_s": {batch_size: 1.0 / rates[f"learn_{batch_size}"] for batch_size in batch_sizes}}
