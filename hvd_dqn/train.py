"""Data-parallel DQN and PQN training with Horovod and TensorFlow-Keras.

  horovodrun -np N python -m hvd_dqn.train --flagfile=configs/cartpole.flags [--flag=value ...]

--flagfile=FILE reads a preset (configs/*.flags); flags given after it override it. --help lists the flags
most runs set, by task; --helpfull lists every flag. From Python: hvd_dqn.runner.Runner.
"""
from __future__ import annotations

import sys
import time

from absl import app, flags, logging

from hvd_dqn.cli import flag_error_text
from hvd_dqn.config import ConfigError
from hvd_dqn.flags import config_from_flags, define_flags, short_help
from hvd_dqn.logdir.checkpoint import CheckpointError
from hvd_dqn.run import horovod_setup

define_flags()
flags.DEFINE_integer("check_ranks", 0, "Check every setting for a job of this many ranks (each rank's share of the "
                     "envs, replay memory and batch included) in this one process and exit without training: 0 "
                     "trains. scripts/train.sh checks so before it starts the ranks, so that a bad setting is one "
                     "line at any number of ranks.")
PROGRAM = "hvd_dqn.train"


def fail(message: str) -> None:
    """Ends this rank with exit code 2; rank 0 alone prints the one-line reason."""
    if horovod_setup.launcher_rank() == 0:
        # One write: a launcher that tags each rank's output (mpirun's [1,0]<stderr>:) tags each write.
        sys.stderr.write(f"{PROGRAM}: error: {message}\n")
        sys.stderr.flush()
    else:
        # Every rank finds the same error, but a launcher stops the whole job when the first rank exits; a
        # short wait lets rank 0 be that rank, so its message is printed instead of being cut off.
        time.sleep(3)
    sys.exit(2)


def parse_flags(argv):
    try:
        return flags.FLAGS(argv)
    except flags.Error as error:
        fail(flag_error_text(error))


def main(argv) -> None:
    if len(argv) > 1:
        fail(f"unexpected arguments {' '.join(argv[1:])}; every setting is a --flag (see --helpfull)")
    rank = horovod_setup.launcher_rank()
    if rank != 0:
        logging.set_verbosity(logging.WARNING)
    try:
        config = config_from_flags(check_logdir_writable=rank == 0)
    except ConfigError as error:
        fail(str(error))
    if flags.FLAGS.check_ranks:
        from hvd_dqn.rank_split import check_world

        try:
            check_world(config, flags.FLAGS.check_ranks)
        except ConfigError as error:
            fail(str(error))
        return
    # Imported once the flags are checked: TensorFlow's import takes seconds, and a bad flag is answered
    # without it.
    from hvd_dqn.run.trainer import Trainer

    try:
        Trainer(config).run()
    except (ConfigError, CheckpointError) as error:
        fail(str(error))


SHORT_HELP_ARGS = ("--help", "-h", "-?", "--helpshort")


def run() -> None:
    """Console-script entry point. --help lists the flags a user sets, by task (absl's own would list only the
    flags defined in this module, none); --helpfull lists every flag."""
    if any(arg in SHORT_HELP_ARGS for arg in sys.argv[1:]):
        print(short_help())
        sys.exit(0)
    if "--helpfull" in sys.argv[1:]:  # absl's own prints the same list but exits 1, as if it had failed
        print(__doc__.strip(), "", "Every flag of hvd_dqn.train:", flags.FLAGS.module_help("hvd_dqn.flags"),
              "", "absl's own flags (--verbosity, --logtostderr, --alsologtostderr, ...) work as in any absl "
              "program.", sep="\n")
        sys.exit(0)
    app.run(main, flags_parser=parse_flags)


if __name__ == "__main__":
    run()
