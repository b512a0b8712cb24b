"""One rank started by a cluster engine (Ray's actors, Spark's tasks) rather than by horovodrun: the engine's
launcher has set the HOROVOD_* variables, and the rank reports back to the driver as data, not as a traceback."""
from __future__ import annotations

import contextlib
import dataclasses

from absl import logging

from hvd_dqn.agent.configs import validate
from hvd_dqn.config import ConfigError, TrainConfig
from hvd_dqn.logdir.checkpoint import CheckpointError


def train_as_rank(config: TrainConfig, while_training=None) -> dict:
    """Trains as the rank the launcher made this process; returns {"counters": ...} or {"error": one line}, so
    the driver reports a training error as one line. `while_training(trainer)`: a context manager around the
    training (the Ray driver's stop watch)."""
    from hvd_dqn.run import horovod_setup

    # Here only: the driver checks flags and starts the engine without TensorFlow's seconds-long import.
    from hvd_dqn.run.trainer import Trainer

    rank = horovod_setup.launcher_rank()
    logging.set_verbosity(logging.INFO if rank == 0 else logging.WARNING)  # rank 0 alone reports progress
    try:
        config = validate(config, check_logdir_writable=rank == 0)  # the driver's host may not be rank 0's
        trainer = Trainer(config)
        with (while_training(trainer) if while_training else contextlib.nullcontext()):
            counters = trainer.run()
    except (ConfigError, CheckpointError) as error:
        return {"error": str(error)}
    return {"counters": dataclasses.asdict(counters)}
