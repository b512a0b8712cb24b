"""Measures the training pipeline's stages side by side on this machine, for one preset:

    python -m hvd_dqn.benchmark --flagfile=configs/pong.flags --json=bench.json

Each figure is taken in alternating rounds with its comparison (A, B, A, B, ...) and reported as the median
round, so both see the same machine load; ratios between them are what the targets are stated in.
- env_raw_steps_per_s: the vector env alone with random actions (same game, env count, emulator threads)
- actor_steps_per_s: the project's acting path (Q-network inference, epsilon-greedy, one env step, replay insert)
- learner_updates_per_s: the project's update (DistributedOptimizer at np=1, double DQN, Huber, clipping)
  against plain_tf_updates_per_s: a plain Keras Adam step on the same network, batch and loss
- replay_sample_batches_per_s: minibatches drawn from a full replay memory of the preset's size (stacks
  rebuilt, episode boundaries handled) against bare_gather_batches_per_s: a bare NumPy gather of the same
  number of random rows or frames from an array of the same size, with no boundary handling
- replay_bytes_per_transition
As issue 7 specifies, the stages get one core's worth of threads each (TensorFlow intra/inter-op threads 1,
emulator threads 1), as they would share a machine whose learner has a GPU of its own.
"""
from __future__ import annotations

import dataclasses
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # see hvd_dqn/train.py

import numpy as np
from absl import app, flags

from hvd_dqn.cli import fail, flags_parser
from hvd_dqn.config import ConfigError
from hvd_dqn.flags import config_from_flags, define_flags

define_flags()
flags.DEFINE_string("json", None, "Write the measurements to this JSON file.")
flags.DEFINE_float("round_seconds", 3.0, "Seconds per measurement round.")
flags.DEFINE_integer("rounds", 3, "Alternating rounds per comparison; the median round is reported.")
FLAGS = flags.FLAGS
PROGRAM = "hvd_dqn.benchmark"


def rate(step, seconds: float) -> float:
    """Calls `step()` (which returns how many units it did) for about `seconds`; returns units per second."""
    done, start = 0, time.perf_counter()
    while True:
        done += step()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return done / elapsed


def side_by_side(steps: dict, seconds: float, rounds: int) -> dict:
    """Median rate of each named step over `rounds` alternating rounds."""
    rates = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            rates[name].append(rate(step, seconds))
    return {name: float(np.median(values)) for name, values in rates.items()}


def main(argv) -> None:
    if len(argv) > 1:
        _fail(f"unexpected arguments {' '.join(argv[1:])}")
    try:
        config = config_from_flags(check_logdir_writable=False)
    except ConfigError as error:
        _fail(str(error))
    if FLAGS.round_seconds <= 0 or FLAGS.rounds <= 0:
        _fail("--round_seconds and --rounds must be positive")
    results = run_benchmark(config, FLAGS.round_seconds, FLAGS.rounds)
    print(format_table(results))
    if FLAGS.json:
        try:
            with open(FLAGS.json, "w") as handle:
                json.dump(results, handle, indent=2, sort_keys=True)
                handle.write("\n")
        except OSError as error:
            _fail(f"--json={FLAGS.json}: cannot write ({error.strerror})")


def run_benchmark(config, seconds: float, rounds: int) -> dict:
    import tensorflow as tf

    from hvd_dqn import distributed
    from hvd_dqn.actor import EpsilonGreedyActor, act_and_store
    from hvd_dqn.envs import env_seeds, make_env_for, spec_of
    from hvd_dqn.learner import DQNLearner, huber, make_optimizer, td_targets
    from hvd_dqn.networks import build_q_network
    from hvd_dqn.train import make_replay_memory

    distributed.init_horovod(intra_op_threads=1, inter_op_threads=1)  # one core's worth for the learner
    tf.keras.utils.set_random_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    results = {"env_id": config.env_id, "num_envs": config.num_envs, "batch_size": config.batch_size,
               "cores": os.cpu_count(), "round_seconds": seconds, "rounds": rounds}

    # --- acting: the raw emulators, then the project's acting path over the same envs --------------------
    single_thread = dataclasses.replace(config, env_threads=1)
    raw_env, acting_env = make_env_for(single_thread, config.num_envs), make_env_for(single_thread, config.num_envs)
    spec = spec_of(raw_env)
    online = build_q_network(spec.observation_shape, spec.observation_dtype, spec.num_actions,
                             config.hidden_sizes, "online", config.dueling)
    actor = EpsilonGreedyActor(online, spec.num_actions, rng)
    acting_replay = make_replay_memory(config, spec)
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
    results.update(_rename(side_by_side({"raw": raw_step, "actor": actor_step}, seconds, rounds),
                           raw="env_raw_steps_per_s", actor="actor_steps_per_s"))
    raw_env.close()
    acting_env.close()

    # --- the replay memory: a full one of the preset's size against a bare gather -------------------------
    replay = make_replay_memory(config, spec)
    _fill(replay, spec, config.num_envs, rng)
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

    results.update(_rename(side_by_side({"sample": sample_step, "bare": bare_step}, seconds, rounds),
                           sample="replay_sample_batches_per_s", bare="bare_gather_batches_per_s"))

    # --- the learner: the project's update against a plain Keras step on the same network and batch ------
    target = build_q_network(spec.observation_shape, spec.observation_dtype, spec.num_actions,
                             config.hidden_sizes, "target", config.dueling)
    learner = DQNLearner(online, target, make_optimizer(config.learning_rate, config.adam_epsilon,
                                                        config.max_grad_norm, 1, False, 0),
                         config.double_dqn, config.huber_delta)
    batch = replay.sample(config.batch_size, rng)
    plain_online = tf.keras.models.clone_model(online)
    plain_target = tf.keras.models.clone_model(target)
    plain_optimizer = tf.keras.optimizers.Adam(config.learning_rate, epsilon=config.adam_epsilon,
                                               global_clipnorm=config.max_grad_norm or None)
    tensors = [tf.convert_to_tensor(value) for value in
               (batch.observation_tm1, batch.action_tm1, batch.reward_t, batch.discount_t, batch.observation_t)]

    @tf.function
    def plain_update(observation_tm1, action_tm1, reward_t, discount_t, observation_t):
        q_online_t = plain_online(observation_t) if config.double_dqn else None
        targets = tf.stop_gradient(td_targets(reward_t, discount_t, plain_target(observation_t), q_online_t))
        with tf.GradientTape() as tape:
            q_taken = tf.gather(plain_online(observation_tm1, training=True), action_tm1, axis=-1, batch_dims=1)
            loss = tf.reduce_mean(huber(targets - q_taken, config.huber_delta))
        variables = plain_online.trainable_variables
        plain_optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    def learner_step():
        learner.update(batch)
        return 1

    def plain_step():
        plain_update(*tensors).numpy()  # .numpy(): wait for the step, as learner.update does
        return 1

    learner_step(), plain_step()  # trace both outside the timing
    results.update(_rename(side_by_side({"learner": learner_step, "plain": plain_step}, seconds, rounds),
                           learner="learner_updates_per_s", plain="plain_tf_updates_per_s"))
    results["learner_vs_plain_tf"] = results["learner_updates_per_s"] / results["plain_tf_updates_per_s"]
    results["replay_sample_vs_bare_gather"] = (results["replay_sample_batches_per_s"]
                                               / results["bare_gather_batches_per_s"])
    return results


def _fill(replay, spec, num_envs: int, rng: np.random.Generator) -> None:
    """Fills `replay` to capacity with random observations and an episode end about every 500 steps."""
    observation = rng.integers(0, 255, size=(num_envs,) + spec.observation_shape).astype(spec.observation_dtype)
    for _ in range(replay.capacity // num_envs + 1):
        ended = rng.random(num_envs) < 0.002
        replay.add(observation, rng.integers(0, spec.num_actions, num_envs), rng.normal(size=num_envs),
                   (~ended).astype(np.float32), observation, ended)


def _rename(values: dict, **names) -> dict:
    return {names[key]: value for key, value in values.items()}


def format_table(results: dict) -> str:
    lines = [f"hvd_dqn benchmark: {results['env_id']}, {results['num_envs']} envs, batch {results['batch_size']}, "
             f"{results['cores']} cores; median of {results['rounds']} alternating rounds of "
             f"{results['round_seconds']:g} s"]
    for key in ("env_raw_steps_per_s", "actor_steps_per_s", "learner_updates_per_s", "plain_tf_updates_per_s",
                "learner_vs_plain_tf", "replay_sample_batches_per_s", "bare_gather_batches_per_s",
                "replay_sample_vs_bare_gather", "replay_bytes_per_transition"):
        value = results[key]
        lines.append(f"  {key:<30} {value:>12,.2f}" if isinstance(value, float) else f"  {key:<30} {value:>12,}")
    return "\n".join(lines)


def _fail(message: str) -> None:
    fail(PROGRAM, message)


def run() -> None:
    app.run(main, flags_parser=flags_parser(PROGRAM))


if __name__ == "__main__":
    run()
