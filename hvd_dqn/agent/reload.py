"""A trained agent back from its checkpoint, for acting: the agent's network rebuilt from the config saved beside
it (through the agent factory, so each agent's own network and greedy Q-values), with the checkpoint's online
weights. Evaluate, export and the Runner act through it. The checkpoint's files themselves are
hvd_dqn/logdir/checkpoint.py's, which knows nothing of the agents."""
from __future__ import annotations

import os
from typing import Optional

from hvd_dqn.logdir.checkpoint import (CheckpointNotFound, complete_checkpoints, read_config_json, read_counters,
                                       resolve, typed_first_line)
from hvd_dqn.logdir.names import checkpoint_root


def load_online_network(path: str, num_envs: int = 1, config=None, greedy: bool = True):
    """(config, vector env of `num_envs` envs, online Q-network) of checkpoint folder `path`: the agent's network
    rebuilt from the config stored beside it (or `config`, already read from it), with the checkpoint's online
    weights, as the agent's Q-values per action (its greedy policy's; greedy=False: the network as the learner
    trained it, e.g. a distributional agent's quantiles or logits). Only what acting needs is read; the
    optimizer and target network in the file are skipped. Weights that do not read back raise _Damaged (the env
    is closed then). The caller closes the env."""
    import tensorflow as tf

    from hvd_dqn.agent.factory import greedy_network, online_network
    from hvd_dqn.agent.configs import config_from_json
    from hvd_dqn.envs import make_env_for, spec_of

    config = config or config_from_json(read_config_json(path))
    env = make_env_for(config, num_envs)
    online = online_network(config, spec_of(env))
    try:
        tf.train.Checkpoint(online=online).read(os.path.join(path, "state")).expect_partial()
    except Exception as error:  # TensorFlow reports damaged files with several error types
        env.close()
        raise _Damaged(typed_first_line(error)) from None
    return config, env, greedy_network(config, online) if greedy else online


def load_named_checkpoint(logdir: Optional[str], explicit: Optional[str], num_envs: int = 1, greedy: bool = True):
    """(path, config, vector env, online Q-network, counters) of the checkpoint a command line names
    (--checkpoint, else the newest under --logdir), for the commands that act with a trained network
    (evaluate, export). A --checkpoint that does not read back is a CheckpointNotFound naming it and the
    damage; under --logdir the newest complete checkpoint that loads is taken, each newer one that does not
    skipped with a warning naming it, as --resume does. Nothing is deleted. The caller closes the env."""
    from hvd_dqn.logdir.storage import is_remote

    if explicit or is_remote(logdir):  # one checkpoint (a stored run's newest is fetched alone)
        path = resolve(logdir, explicit)
        try:
            return (path,) + _load_for_acting(path, num_envs, greedy)
        except _Damaged as damage:
            flag = f"--checkpoint={explicit}" if explicit else f"--logdir={logdir}: its newest checkpoint {path}"
            raise CheckpointNotFound(f"{flag}: damaged, it does not load ({damage})") from None
    resolve(logdir, None)  # the flag's errors: no folder, no complete checkpoint
    candidates = complete_checkpoints(logdir)[::-1]
    for path in candidates:
        try:
            return (path,) + _load_for_acting(path, num_envs, greedy)
        except _Damaged as damage:
            from absl import logging

            logging.warning("skipping checkpoint %s: damaged, it does not load (%s)", path, damage)
    raise CheckpointNotFound(f"--logdir={logdir}: none of the {len(candidates)} complete checkpoints under "
                             f"{checkpoint_root(logdir)} loads (see the warnings above); nothing was deleted")


class _Damaged(Exception):
    """A checkpoint's files do not read back; the message is the first line of what failed."""


def _load_for_acting(path: str, num_envs: int, greedy: bool = True):
    """(config, env, online, counters) of checkpoint folder `path`; _Damaged if one of its files does not read
    back (an env that cannot be made is not damage, and raises as it would)."""
    from hvd_dqn.agent.configs import config_from_json

    try:
        config = config_from_json(read_config_json(path))
        counters = read_counters(path)
    except (OSError, ValueError, TypeError) as error:
        raise _Damaged(typed_first_line(error)) from None
    return load_online_network(path, num_envs, config, greedy) + (counters,)
