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
- train_steps_per_s: the trainer's own iteration (acting, storing and the updates they pay for, at the preset's
  replay ratio) with acting ahead of learning on its own thread (--pipeline=on), against
  train_steps_per_s_overlap (the emulators stepping while the previous step's updates are made) and
  train_steps_per_s_no_overlap (in order); the trainers' memories are filled to the preset's capacity first.
  overlap_efficiency: train_steps_per_s over the slower of the two stages alone, min(actor_steps_per_s,
  learner_updates_per_s x train_frequency); overlap_efficiency_per_step: the same for the overlap.
- balanced_train_frequency: the env steps per update at which the learner's capacity equals acting's
  (actor_steps_per_s / learner_updates_per_s, rounded); there the same three trainers give balanced_steps_per_s
  (pipeline), balanced_steps_per_s_overlap and balanced_steps_per_s_in_order, and balanced_efficiency is the
  pipeline's rate over min(acting, learning capacity); balanced_speedup the pipeline's over in order.
- policy_actions_per_s_batch{1,32,256}: greedy actions per second from the exported policy (the SavedModel
  `python -m hvd_dqn.export` writes, loaded back), called with 1, 32 or 256 observations at a time.
Under horovodrun with two or more ranks (`scripts/benchmark.sh` runs both), it measures the gradient
allreduce instead and adds to --json: allreduce_ms_per_update (the Q-network's gradients, averaged across
ranks as DistributedOptimizer does, Horovod's tensor fusion included), gradient_bytes_per_update,
loopback_bytes_per_s (a TCP stream through 127.0.0.1) and ring_allreduce_ms_predicted, the ring algorithm's
2(N-1)/N x bytes / bandwidth on that bandwidth.
As issue 7 specifies, the stages get one core's worth of threads each (TensorFlow intra/inter-op threads 1,
emulator threads 1), as they would share a machine whose learner has a GPU of its own. The full-training figures
are taken in a child process whose TensorFlow has two inter-op threads, one for each side of the pipeline
(with one, the acting thread's inference waits for the learner's ops), the same for all three modes.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import time

import numpy as np
from absl import app, flags

from hvd_dqn.cli import fail, flags_parser
from hvd_dqn.config import ConfigError
from hvd_dqn.flags import config_from_flags, define_flags

define_flags()
flags.DEFINE_string("json", None, "Write the measurements to this JSON file.")
flags.DEFINE_float("round_seconds", 3.0, "Seconds per measurement round.")
flags.DEFINE_integer("rounds", 3, "Alternating rounds per comparison; the median round is reported.")
flags.DEFINE_enum("part", "all", ["all", "training"], "Internal: the benchmark runs its full-training figures in a "
                  "child process of its own with --part=training (TensorFlow's thread pools are per process).")
flags.DEFINE_integer("balanced_train_frequency", 1, "Internal, with --part=training: the balanced ratio to time.")
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


def side_by_side(steps: dict, seconds: float, rounds: int, before_round: dict = None) -> dict:
    """Median rate of each named step over `rounds` alternating rounds; `before_round[name]()`, if given, runs
    before each of that step's rounds, outside the timing."""
    rates = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            if before_round and name in before_round:
                before_round[name]()
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
    from hvd_dqn.run import distributed

    if FLAGS.part == "training":  # the child process of run_benchmark: see _training_part
        distributed.init_horovod(intra_op_threads=1, inter_op_threads=2)
        _training_part(config, FLAGS.round_seconds, FLAGS.rounds, FLAGS.json)
        return
    # One core's worth per stage: one thread inside each op and one running ops.
    distributed.init_horovod(intra_op_threads=1, inter_op_threads=1)
    import horovod.tensorflow as hvd

    if hvd.size() > 1:
        results = run_allreduce_benchmark(config, FLAGS.round_seconds, FLAGS.rounds)
        if hvd.rank() != 0:
            return
        keys = ALLREDUCE_KEYS
        if FLAGS.json and os.path.exists(FLAGS.json):  # beside the single-process figures of the same preset
            try:
                with open(FLAGS.json) as handle:
                    results = dict(json.load(handle), **results)
            except (OSError, ValueError) as error:
                _fail(f"--json={FLAGS.json}: cannot add to it ({error})")
    else:
        results, keys = run_benchmark(config, FLAGS.round_seconds, FLAGS.rounds), SINGLE_PROCESS_KEYS
    print(format_table(results, keys))
    if FLAGS.json:
        try:
            with open(FLAGS.json, "w") as handle:
                json.dump(results, handle, indent=2, sort_keys=True)
                handle.write("\n")
        except OSError as error:
            _fail(f"--json={FLAGS.json}: cannot write ({error.strerror})")


def run_benchmark(config, seconds: float, rounds: int) -> dict:
    import tensorflow as tf

    from hvd_dqn.agent.learner import DQNLearner, huber, make_optimizer, td_targets
    from hvd_dqn.agent.networks import q_network_for
    from hvd_dqn.agent.policy import EpsilonGreedyActor, act_and_store
    from hvd_dqn.envs import env_seeds, make_env_for, spec_of
    from hvd_dqn.run import distributed
    from hvd_dqn.run.learning_side import make_replay_memory

    tf.keras.utils.set_random_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    results = {"env_id": config.env_id, "num_envs": config.num_envs, "batch_size": config.batch_size,
               "cores": os.cpu_count(), "round_seconds": seconds, "rounds": rounds}

    # --- acting: the raw emulators, then the project's acting path over the same envs --------------------
    single_thread = dataclasses.replace(config, env_threads=1)
    raw_env, acting_env = make_env_for(single_thread, config.num_envs), make_env_for(single_thread, config.num_envs)
    spec = spec_of(raw_env)
    online = q_network_for(config, spec, "online")
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
    target = q_network_for(config, spec, "target")
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
    del replay, acting_replay  # free their memory before the trainers fill theirs

    # --- serving: the exported SavedModel's greedy actions, per batch size --------------------------------
    results.update(_exported_policy_rates(online, spec, rng, seconds, rounds))

    # --- full training, at the preset's replay ratio and at the balanced one --------------------------------
    # One update per `balanced` env steps makes the learner's capacity (updates/s x env steps per update) equal
    # acting's; there, and only there, any idle side is lost time the pipeline can win back.
    acting_rate, update_rate = results["actor_steps_per_s"], results["learner_updates_per_s"]
    balanced = max(1, round(acting_rate / update_rate))
    results["balanced_train_frequency"] = balanced
    results.update(_run_training_part(balanced, seconds, rounds))
    results["overlap_speedup"] = results["train_steps_per_s"] / results["train_steps_per_s_no_overlap"]
    slower_stage = min(acting_rate, update_rate * config.train_frequency)
    results["overlap_efficiency"] = results["train_steps_per_s"] / slower_stage
    results["overlap_efficiency_per_step"] = results["train_steps_per_s_overlap"] / slower_stage
    results["balanced_efficiency"] = results["balanced_steps_per_s"] / min(acting_rate, update_rate * balanced)
    results["balanced_speedup"] = results["balanced_steps_per_s"] / results["balanced_steps_per_s_in_order"]
    results["replay_sample_vs_bare_gather"] = (results["replay_sample_batches_per_s"]
                                               / results["bare_gather_batches_per_s"])
    return results


def run_allreduce_benchmark(config, seconds: float, rounds: int) -> dict:
    """Collective: the cost of one update's gradient allreduce across this job's ranks, and what the ring
    formula predicts for it from this machine's loopback bandwidth (measured on rank 0)."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    from hvd_dqn.agent.networks import q_network_for
    from hvd_dqn.envs import make_env_for, spec_of

    env = make_env_for(dataclasses.replace(config, env_threads=1), 1)
    spec = spec_of(env)
    env.close()
    network = q_network_for(config, spec, "online")
    gradients = [tf.random.normal(variable.shape, seed=hvd.rank()) for variable in network.trainable_variables]
    gradient_bytes = sum(int(np.prod(gradient.shape)) * 4 for gradient in gradients)

    @tf.function
    def allreduce():
        # As DistributedOptimizer does: one averaging allreduce per gradient, which Horovod fuses.
        return [hvd.allreduce(gradient, op=hvd.Average, name=f"gradient_{index}")
                for index, gradient in enumerate(gradients)]

    def step():
        outputs = allreduce()
        outputs[-1].numpy()  # wait for it
        return 1

    step()  # trace and negotiate outside the timing
    # Timed by call count, not by the clock: every rank must issue the same number of collectives, or the
    # last ones would wait forever. Rank 0's probe decides the count for everyone.
    probe_start = time.perf_counter()
    for _ in range(5):
        step()
    calls = max(5, int(seconds / ((time.perf_counter() - probe_start) / 5)))
    calls = int(hvd.broadcast_object(calls, root_rank=0, name="benchmark_calls"))
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            step()
        rates.append(calls / (time.perf_counter() - start))
    updates_per_s = float(np.median(rates))
    bandwidth = _loopback_bytes_per_s() if hvd.rank() == 0 else 0.0
    size = hvd.size()
    return {"ranks": size, "gradient_bytes_per_update": gradient_bytes,
            "allreduce_ms_per_update": 1000.0 / updates_per_s, "loopback_bytes_per_s": bandwidth,
            "ring_allreduce_ms_predicted": 1000.0 * 2 * (size - 1) / size * gradient_bytes / bandwidth
            if bandwidth else None}


def _loopback_bytes_per_s(total_bytes: int = 512 * 2**20, chunk: int = 4 * 2**20) -> float:
    """Bytes per second of one TCP stream through 127.0.0.1 on this machine (a sender thread, a receiver)."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    receiver_done = threading.Event()

    def receive():
        connection, _ = listener.accept()
        with connection:
            received, buffer = 0, bytearray(chunk)
            while received < total_bytes:
                count = connection.recv_into(buffer)
                if not count:
                    break
                received += count
        receiver_done.set()

    thread = threading.Thread(target=receive, daemon=True)
    thread.start()
    payload = bytes(chunk)
    with socket.create_connection(listener.getsockname()) as sender:
        start = time.perf_counter()
        for _ in range(total_bytes // chunk):
            sender.sendall(payload)
        receiver_done.wait()
        elapsed = time.perf_counter() - start
    listener.close()
    return total_bytes / elapsed


def _run_training_part(balanced_train_frequency: int, seconds: float, rounds: int) -> dict:
    """The full-training figures, measured by a child process of this benchmark with the same flags.

    A process of its own, since TensorFlow's thread pools are the process's and fixed once it starts: the
    stages above are timed with one inter-op thread (one core's worth each), but the pipeline needs two, one
    for each side's ops (with one, its acting thread's inference waits for the learner's ops: measured, 40
    inferences/s beside a Nature-CNN update instead of 337). All three modes are timed there alike."""
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hvd_dqn_benchmark_") as folder:
        report = os.path.join(folder, "training.json")
        command = [sys.executable, "-m", "hvd_dqn.benchmark", *sys.argv[1:], "--part=training",
                   f"--balanced_train_frequency={balanced_train_frequency}", f"--round_seconds={seconds}",
                   f"--rounds={rounds}", f"--json={report}"]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"the full-training part failed (exit {result.returncode}): {tail}")
        with open(report) as handle:
            return json.load(handle)


def _training_part(config, seconds: float, rounds: int, report: str) -> None:
    """In the child process: the trainer's own iteration in each mode, at the preset's replay ratio and at
    --balanced_train_frequency, written to `report` as JSON."""
    from hvd_dqn.envs import make_env_for, spec_of

    env = make_env_for(dataclasses.replace(config, env_threads=1), 1)
    spec = spec_of(env)
    env.close()
    rng = np.random.default_rng(config.seed)
    results = _rename(_training_rates(config, spec, rng, seconds, rounds), pipeline="train_steps_per_s",
                      overlap="train_steps_per_s_overlap", in_order="train_steps_per_s_no_overlap")
    balanced = dataclasses.replace(config, train_frequency=FLAGS.balanced_train_frequency)
    results.update(_rename(_training_rates(balanced, spec, rng, seconds, rounds), pipeline="balanced_steps_per_s",
                           overlap="balanced_steps_per_s_overlap", in_order="balanced_steps_per_s_in_order"))
    with open(report, "w") as handle:
        json.dump(results, handle)


TRAINING_MODES = {  # name: (--pipeline, --overlap_acting)
    "pipeline": ("on", False),  # acting ahead on its own thread (hvd_dqn.run.pipeline): Atari's default
    "overlap": ("off", True),  # the emulators' own threads step while the previous step's updates are made
    "in_order": ("off", False),
}


def _training_rates(config, spec, rng: np.random.Generator, seconds: float, rounds: int) -> dict:
    """Side by side: a trainer of `config` in each of TRAINING_MODES, one core's worth of threads each stage,
    memories full; their env steps per second, by mode name. Each pipeline round starts from an empty queue (a
    new acting thread), so acting done ahead while the other modes were timed is not counted."""
    trainers = {name: _full_trainer(config, spec, rng, pipeline, overlap)
                for name, (pipeline, overlap) in TRAINING_MODES.items()}
    try:
        def restart_pipeline():
            trainers["pipeline"].end_acting()
            trainers["pipeline"].begin_acting()

        steps = {name: functools.partial(_one_iteration, trainer) for name, trainer in trainers.items()}
        return side_by_side(steps, seconds, rounds, before_round={"pipeline": restart_pipeline})
    finally:
        for trainer in trainers.values():
            trainer.end_acting()
            trainer.acting.close()
            trainer.learning.close()


def _full_trainer(config, spec, rng: np.random.Generator, pipeline: str, overlap: bool):
    """A Trainer of `config` with its memory full, ready to step: no evaluation, logging or checkpoints,
    exploration at its final epsilon, the update and inference traced."""
    import tempfile

    from hvd_dqn.run.trainer import Trainer

    trainer = Trainer(dataclasses.replace(
        config, pipeline=pipeline, overlap_acting=overlap, env_threads=1, intra_op_threads=1,
        inter_op_threads=2 - int(pipeline == "on"),  # two in all: the trainer adds one for the pipeline
        eval_interval_env_steps=0, log_interval_env_steps=0, checkpoint_interval_env_steps=0,
        total_env_steps=2**62, epsilon_start=config.epsilon_end,
        logdir=tempfile.mkdtemp(prefix="hvd_dqn_benchmark_")))
    _fill(trainer.learning.replay, spec, trainer.acting.num_envs, rng)
    trainer.acting.reset(config.seed, stream=0)
    trainer.begin_acting()
    for _ in range(3):  # past the readiness check, with the update and inference traced
        trainer.step()
    return trainer


def _one_iteration(trainer) -> int:
    trainer.step()
    return trainer.env_steps_per_iteration


def _fill(replay, spec, num_envs: int, rng: np.random.Generator) -> None:
    """Fills `replay` to capacity with random observations and an episode end about every 500 steps."""
    observation = rng.integers(0, 255, size=(num_envs,) + spec.observation_shape).astype(spec.observation_dtype)
    for _ in range(replay.capacity // num_envs + 1):
        ended = rng.random(num_envs) < 0.002
        replay.add(observation, rng.integers(0, spec.num_actions, num_envs), rng.normal(size=num_envs),
                   (~ended).astype(np.float32), observation, ended)


POLICY_BATCH_SIZES = (1, 32, 256)


def _exported_policy_rates(online, spec, rng: np.random.Generator, seconds: float, rounds: int) -> dict:
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


def _rename(values: dict, **names) -> dict:
    return {names[key]: value for key, value in values.items()}


SINGLE_PROCESS_KEYS = (
    "env_raw_steps_per_s", "actor_steps_per_s", "learner_updates_per_s", "plain_tf_updates_per_s",
    "learner_vs_plain_tf", "replay_sample_batches_per_s", "bare_gather_batches_per_s", "replay_sample_vs_bare_gather",
    "replay_bytes_per_transition", "train_steps_per_s", "train_steps_per_s_overlap", "train_steps_per_s_no_overlap",
    "overlap_speedup", "overlap_efficiency", "overlap_efficiency_per_step", "balanced_train_frequency",
    "balanced_steps_per_s", "balanced_steps_per_s_overlap", "balanced_steps_per_s_in_order", "balanced_efficiency",
    "balanced_speedup") + tuple(f"policy_actions_per_s_batch{batch}" for batch in POLICY_BATCH_SIZES)
ALLREDUCE_KEYS = ("ranks", "gradient_bytes_per_update", "allreduce_ms_per_update", "loopback_bytes_per_s",
                  "ring_allreduce_ms_predicted")


def format_table(results: dict, keys=SINGLE_PROCESS_KEYS) -> str:
    lines = [f"hvd_dqn benchmark: {config_summary(results)}, {results.get('cores', os.cpu_count())} cores; "
             f"median of {FLAGS.rounds} alternating rounds of {FLAGS.round_seconds:g} s"]
    for key in keys:
        value = results[key]
        text = f"{value:,.2f}" if isinstance(value, float) else f"{value:,}" if isinstance(value, int) else str(value)
        lines.append(f"  {key:<30} {text:>16}")
    return "\n".join(lines)


def config_summary(results: dict) -> str:
    return (f"{results['env_id']}, {results['num_envs']} envs, batch {results['batch_size']}"
            if "env_id" in results else FLAGS.env_id)


def _fail(message: str) -> None:
    fail(PROGRAM, message)


def run() -> None:
    app.run(main, flags_parser=flags_parser(PROGRAM))


if __name__ == "__main__":
    run()
