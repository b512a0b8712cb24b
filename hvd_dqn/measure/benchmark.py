"""Measures the training pipeline's stages side by side on this machine, for one preset:

    python -m hvd_dqn.measure.benchmark --flagfile=configs/pong.flags --json=bench.json

Each figure is taken in alternating rounds with its comparison (A, B, A, B, ...) and reported as the median
round, so both see the same machine load; ratios between them are what the targets are stated in.
- env_raw_steps_per_s: the vector env alone with random actions (same game, env count, emulator threads)
- actor_steps_per_s: the project's acting path (Q-network inference, epsilon-greedy, one env step, replay insert)
- learner_updates_per_s: the agent's update (DistributedOptimizer at np=1; its network, targets and loss:
  DQN's, or QR-DQN's quantiles) against plain_tf_updates_per_s: the same update stepped by Keras' own Adam,
  without Horovod's wrapper
- replay_sample_batches_per_s: minibatches drawn from a full replay memory of the preset's size (stacks
  rebuilt, episode boundaries handled) against bare_gather_batches_per_s: a bare NumPy gather of the same
  number of random rows or frames from an array of the same size, with no boundary handling
- replay_bytes_per_transition
- train_steps_per_s: the trainer's own iteration (acting, storing and the updates then due, at the preset's
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
2(N-1)/N x bytes / bandwidth on that bandwidth. With --exchange_batch_size it first times the trainer's own
update with its exchange (update_exchanged_ms) against the same update without it (update_alone_ms), in short
adjacent blocks on every rank at once; exchange_in_update_ms, the median of the blocks' paired differences, is
what the exchange costs a rank inside a real update (the cost model's t_sync). exchanged_ranks_agree and
alone_ranks_agree say whether the ranks' networks were still equal after those updates, as they must be with the
exchange and cannot be without.
The stages get one core's worth of threads each (TensorFlow intra/inter-op threads 1,
emulator threads 1), as they would share a machine whose learner has a GPU of its own. The full-training figures
are taken in a child process whose TensorFlow has two inter-op threads, one for each side of the pipeline
(with one, the acting thread's inference waits for the learner's ops), the same for all three modes.
"""
from __future__ import annotations

import json
import os
import sys

from absl import flags

from hvd_dqn.rank_split import learns_from_replay
from hvd_dqn.cli import Command
from hvd_dqn.config import ConfigError
from hvd_dqn.flags import config_from_flags, define_flags
from hvd_dqn.measure.stages import POLICY_BATCH_SIZES

define_flags()
flags.DEFINE_string("json", None, "Write the measurements to this JSON file.")
flags.DEFINE_float("round_seconds", 3.0, "Seconds per measurement round.")
flags.DEFINE_integer("rounds", 3, "Alternating rounds per comparison; the median round is reported.")
flags.DEFINE_enum("part", "all", ["all", "stages", "training"], "stages: the stages alone, without the full-training "
                  "figures (quicker). training is internal: the benchmark runs its full-training figures in a child "
                  "process of its own with --part=training (TensorFlow's thread pools are per process).")
flags.DEFINE_float("allreduce_busy_ms", 0.0, "Under horovodrun: milliseconds each rank keeps its core busy before "
                   "each timed allreduce (its acting and update in training); 0: back to back.")
flags.DEFINE_integer("exchange_batch_size", 0, "Under horovodrun: also time the trainer's own update on minibatches of "
                     "this size with and without its gradient exchange (exchange_in_update_ms, the cost model's "
                     "t_sync); 0: not.")
flags.DEFINE_float("exchange_acting_ms", 0.0, "With --exchange_batch_size: milliseconds each rank keeps its core busy "
                   "before each update (its acting in training).")
flags.DEFINE_integer("balanced_train_frequency", 1, "Internal, with --part=training: the balanced ratio to time.")
FLAGS = flags.FLAGS
PROGRAM = "hvd_dqn.measure.benchmark"
COMMAND = Command(PROGRAM)


def main(argv) -> None:
    if len(argv) > 1:
        COMMAND.fail(f"unexpected arguments {' '.join(argv[1:])}")
    try:
        config = config_from_flags(check_logdir_writable=False)
    except ConfigError as error:
        COMMAND.fail(str(error))
    if not learns_from_replay(config):
        COMMAND.fail("--agent=pqn: the stage benchmark measures DQN's stages (replay, target network); for PQN "
              "use python -m hvd_dqn.measure.benchmark_workers, which times real training runs")
    if FLAGS.round_seconds <= 0 or FLAGS.rounds <= 0:
        COMMAND.fail("--round_seconds and --rounds must be positive")
    from hvd_dqn.run import horovod_setup

    if FLAGS.part == "training":  # the child process of run_benchmark: see _training_part
        from hvd_dqn.measure.training_modes import training_part

        horovod_setup.init_horovod(intra_op_threads=1, inter_op_threads=2)
        training_part(config, FLAGS.balanced_train_frequency, FLAGS.round_seconds, FLAGS.rounds, FLAGS.json)
        return
    # One core's worth per stage: one thread inside each op and one running ops.
    horovod_setup.init_horovod(intra_op_threads=1, inter_op_threads=1, cores_per_rank=config.cores_per_rank)
    import horovod.tensorflow as hvd

    if hvd.size() > 1:
        from hvd_dqn.measure.allreduce import allreduce_rates

        results, keys = {}, ALLREDUCE_KEYS
        if FLAGS.exchange_batch_size > 0:
            from hvd_dqn.measure.allreduce import exchange_in_update

            try:
                results = exchange_in_update(config, FLAGS.exchange_batch_size, FLAGS.round_seconds, FLAGS.rounds,
                                             FLAGS.exchange_acting_ms / 1000.0)
            except ValueError as error:
                COMMAND.fail(str(error))
            keys += EXCHANGE_KEYS
        results.update(allreduce_rates(config, FLAGS.round_seconds, FLAGS.rounds, FLAGS.allreduce_busy_ms / 1000.0))
        if hvd.rank() != 0:
            return
        if FLAGS.json and os.path.exists(FLAGS.json):  # beside the single-process figures of the same preset
            try:
                with open(FLAGS.json) as handle:
                    results = dict(json.load(handle), **results)
            except (OSError, ValueError) as error:
                COMMAND.fail(f"--json={FLAGS.json}: cannot add to it ({error})")
    else:
        from hvd_dqn.measure.stages import stage_rates

        results = stage_rates(config, FLAGS.round_seconds, FLAGS.rounds, sys.argv, FLAGS.part != "stages")
        keys = [key for key in SINGLE_PROCESS_KEYS if key in results]
    print(format_table(results, keys))
    if FLAGS.json:
        try:
            with open(FLAGS.json, "w") as handle:
                json.dump(results, handle, indent=2, sort_keys=True)
                handle.write("\n")
        except OSError as error:
            COMMAND.fail(f"--json={FLAGS.json}: cannot write ({error.strerror})")


SINGLE_PROCESS_KEYS = (
    "env_raw_steps_per_s", "actor_steps_per_s", "learner_updates_per_s", "plain_tf_updates_per_s",
    "learner_vs_plain_tf", "replay_sample_batches_per_s", "bare_gather_batches_per_s", "replay_sample_vs_bare_gather",
    "replay_bytes_per_transition", "train_steps_per_s", "train_steps_per_s_overlap", "train_steps_per_s_no_overlap",
    "overlap_speedup", "overlap_efficiency", "overlap_efficiency_per_step", "balanced_train_frequency",
    "balanced_steps_per_s", "balanced_steps_per_s_overlap", "balanced_steps_per_s_in_order", "balanced_efficiency",
    "balanced_speedup") + tuple(f"policy_actions_per_s_batch{batch}" for batch in POLICY_BATCH_SIZES)

ALLREDUCE_KEYS = ("ranks", "gradient_bytes_per_update", "allreduce_ms_per_update", "loopback_bytes_per_s",
                  "ring_allreduce_ms_predicted")
EXCHANGE_KEYS = ("exchange_batch_size", "update_exchanged_ms", "update_alone_ms", "exchange_in_update_ms",
                 "exchanged_ranks_agree", "alone_ranks_agree")


def format_table(results: dict, keys=SINGLE_PROCESS_KEYS) -> str:
    lines = [f"hvd_dqn benchmark: {config_summary(results)}, {results.get('cores', os.cpu_count())} cores; "
             f"median of {FLAGS.rounds} alternating rounds of {FLAGS.round_seconds:g} s"]
    for key in keys:
        value = results[key]
        if isinstance(value, bool):
            text = "yes" if value else "no"
        elif isinstance(value, float):
            text = f"{value:,.2f}"
        else:
            text = f"{value:,}" if isinstance(value, int) else str(value)
        lines.append(f"  {key:<30} {text:>16}")
    return "\n".join(lines)


def config_summary(results: dict) -> str:
    return (f"{results['env_id']}, {results['num_envs']} envs, batch {results['batch_size']}"
            if "env_id" in results else FLAGS.env_id)



def run() -> None:
    COMMAND.run(main)


if __name__ == "__main__":
    run()
