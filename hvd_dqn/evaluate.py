"""Plays evaluation episodes with a trained agent:

    python -m hvd_dqn.evaluate --logdir=runs/pong --episodes=10 --epsilon=0.05 --json=eval.json --video=pong.mp4

Loads the newest complete checkpoint in --logdir that reads back (skipping, with a warning, any that is damaged), or
--checkpoint, rebuilds the network from the config stored beside it, plays --episodes episodes (at the training
run's --eval_epsilon unless --epsilon is given; Atari games with the training run's no-op starts, FIRE resets and
sticky actions) and prints and writes {"mean_return": ..., "median_return": ..., "episodes": N, ...} with raw game
scores. With --video it also films one more episode from the full-colour screen; with --greedy_actions it also says
how often the greedy policy picked each action and how far apart its Q-values stood. Runs in one process; Horovod is
not needed.
"""
from __future__ import annotations

import json

from absl import flags

from hvd_dqn.cli import Command
from hvd_dqn.runner import EvaluationError, evaluate_checkpoint

PROGRAM = "hvd_dqn.evaluate"
COMMAND = Command(PROGRAM)

flags.DEFINE_string("logdir", None, "Training log folder whose latest complete checkpoint is evaluated.")
flags.DEFINE_string("checkpoint", None, "A specific checkpoint folder (.../checkpoints/ckpt-N) instead of the latest.")
flags.DEFINE_integer("episodes", 20, "Episodes to play, in parallel environments.")
flags.DEFINE_float("epsilon", None, "Exploration probability while evaluating (0 is greedy); default: the training "
                   "run's --eval_epsilon (Dopamine's protocol: 0.001, so an agent that has not learned to press "
                   "FIRE in Breakout cannot stall an episode for its whole 27,000 steps).")
flags.DEFINE_integer("seed", 12345, "Seed of the evaluation environments (distinct from training's by default).")
flags.DEFINE_string("json", None, "Also write the results to this JSON file.")
flags.DEFINE_string("video", None, "Also record one episode (same --epsilon and --seed) to this .mp4 or .gif file.")
flags.DEFINE_bool("greedy_actions", False, "Also report, over the states of the episodes played, how often the greedy "
                  "policy picks each action (by its name in Atari games) and the median action gap, the best Q-value "
                  "less the second best: a policy collapsed onto one action shows here.")
FLAGS = flags.FLAGS


def main(argv) -> None:
    if len(argv) > 1:
        COMMAND.fail(f"unexpected arguments {' '.join(argv[1:])}")
    if FLAGS.episodes <= 0:
        COMMAND.fail(f"--episodes={FLAGS.episodes}: must be a positive integer")
    if FLAGS.epsilon is not None and not 0.0 <= FLAGS.epsilon <= 1.0:
        COMMAND.fail(f"--epsilon={FLAGS.epsilon}: must be a probability in [0, 1]")
    if FLAGS.video:
        from hvd_dqn.logdir.video import check_video_path

        try:
            check_video_path(FLAGS.video)  # before the episodes, not after
        except ValueError as error:
            COMMAND.fail(str(error))
    from hvd_dqn.logdir import checkpoint

    try:
        result = evaluate_checkpoint(FLAGS.logdir, FLAGS.checkpoint, FLAGS.episodes, FLAGS.epsilon, FLAGS.seed,
                                     FLAGS.video, FLAGS.greedy_actions)
    except (checkpoint.CheckpointNotFound, EvaluationError) as error:
        COMMAND.fail(str(error))
    text = json.dumps(result, indent=2)
    print(text)
    if FLAGS.json:
        try:
            with open(FLAGS.json, "w") as handle:
                handle.write(text + "\n")
        except OSError as error:
            COMMAND.fail(f"--json={FLAGS.json}: cannot write ({error.strerror})")



def run() -> None:
    COMMAND.run(main)


if __name__ == "__main__":
    run()
