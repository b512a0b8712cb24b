"""Exports a trained agent's greedy policy as a TensorFlow SavedModel, to serve without hvd_dqn:

    python -m hvd_dqn.export --logdir=runs/pong --out=policies/pong

Loads the newest complete checkpoint in --logdir that reads back (skipping, with a warning, any that is
damaged), or --checkpoint, rebuilds the online Q-network from the
config stored beside it, and writes a SavedModel whose `serving_default` signature takes a batch of
observations exactly as the environment returns them (uint8 frame stacks (B, 4, 84, 84) for Atari, bool grids
(B, 10, 10, C) for MinAtar, float32 vectors for classic control) and returns

    actions   int32 (B,)          argmax_a Q(s, a): the greedy action, ties to the lowest index as in training
    q_values  float32 (B, actions)

An agent that learns the return's distribution (QR-DQN, IQN, C51) also gets a `distribution` signature, which
returns the same two and the distribution itself: `quantiles` (B, actions, N) at the levels the policy file lists
(QR-DQN, IQN), or `probabilities` (B, actions, atoms) of the returns it lists (C51).

Load it with `tf.saved_model.load(OUT).signatures["serving_default"](observation=...)`, TensorFlow Serving
or any SavedModel runtime. OUT/hvd_dqn_policy.json says what the policy expects and gives (env id, observation
shape and dtype, number of actions, the agent and its settings that shape the outputs, each signature's outputs,
the checkpoint and its env steps). The export is written beside OUT and renamed into place when complete, so OUT
is never half written; an existing OUT is kept unless --overwrite is given. Missing parent folders of OUT are made;
files and folders get the modes the user's umask gives, so a serving process of another user can read them where
the umask lets it. Runs in one process; Horovod is not needed.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Optional

from absl import flags

from hvd_dqn.cli import Command

PROGRAM = "hvd_dqn.export"
COMMAND = Command(PROGRAM)

flags.DEFINE_string("logdir", None, "Training log folder whose latest complete checkpoint is exported.")
flags.DEFINE_string("checkpoint", None, "A specific checkpoint folder (.../checkpoints/ckpt-N) instead of the latest.")
flags.DEFINE_string("out", None, "Folder the SavedModel is written to (must not exist unless --overwrite; missing "
                    "parent folders are made).")
flags.DEFINE_boolean("overwrite", False, "Replace --out if it exists (only once the new export is complete).")
FLAGS = flags.FLAGS


class ExportError(Exception):
    pass


def export(logdir: Optional[str], explicit: Optional[str], out: str, overwrite: bool = False) -> dict:
    """Writes the greedy policy of the checkpoint --logdir/--checkpoint name (`reload.load_named_checkpoint`)
    to `out` as a SavedModel; returns what hvd_dqn_policy.json holds."""
    import tensorflow as tf

    from hvd_dqn.agent import reload
    from hvd_dqn.agent.factory import greedy_network, served_distribution
    from hvd_dqn.agent.serving import POLICY_INFO, save_greedy_policy
    from hvd_dqn.envs import spec_of
    from hvd_dqn.logdir.modes import as_if_made_here

    out = os.path.abspath(out)
    if os.path.exists(out) and not overwrite:
        raise ExportError(f"--out={out}: already exists (choose another folder, or --overwrite to replace it)")
    parent = os.path.dirname(out)
    if os.path.exists(parent) and not os.path.isdir(parent):
        raise ExportError(f"--out={out}: {parent} is a file, not a folder")
    checkpoint_path, config, env, trained, counters = reload.load_named_checkpoint(logdir, explicit, greedy=False)
    spec = spec_of(env)
    env.close()
    greedy, distribution = greedy_network(config, trained), served_distribution(config, trained)
    info = policy_info(config, spec, distribution)
    info.update(checkpoint=os.path.abspath(checkpoint_path), env_steps=counters["env_steps"],
                updates=counters["updates"])
    try:
        os.makedirs(parent, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.partial-", dir=parent)
    except OSError as error:
        raise ExportError(f"--out={out}: cannot write into {parent} ({error.strerror})") from None
    try:
        save_greedy_policy(greedy, spec.observation_shape, tf.as_dtype(spec.observation_dtype), staging, distribution)
        with open(os.path.join(staging, POLICY_INFO), "w") as handle:
            json.dump(info, handle, indent=2)
            handle.write("\n")
        as_if_made_here(staging)  # mkdtemp's 0700 would keep the export from a server of another user
        if os.path.exists(out):  # --overwrite: the old export goes only now that the new one is complete
            shutil.rmtree(out)
        os.rename(staging, out)
    except OSError as error:
        raise ExportError(f"--out={out}: cannot write the SavedModel ({error.strerror or error})") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone already after the rename; a failed export's leftovers
    return dict(info, out=out)


def policy_info(config, spec, distribution) -> dict:
    """What hvd_dqn_policy.json says of a policy: what it expects, the agent that learnt it with the settings that
    shape its outputs, and what each signature returns."""
    import numpy as np

    from hvd_dqn.agent.factory import agent_entry
    from hvd_dqn.agent.serving import DISTRIBUTION_SIGNATURE

    entry = agent_entry(config)
    greedy_outputs = dict(actions="int32 (B,): greedy actions", q_values="float32 (B, num_actions)")
    signatures = {"serving_default": dict(outputs=greedy_outputs)}
    settings = {name: getattr(config, name) for name in entry.shapes_checkpoint}
    if distribution is not None:
        signatures[DISTRIBUTION_SIGNATURE] = dict(outputs=dict(greedy_outputs, **{
            distribution.output: distribution.description}), points=distribution.points)
        settings.update(distribution.settings)
    return dict(env_id=config.env_id, observation_shape=list(spec.observation_shape),
                observation_dtype=np.dtype(spec.observation_dtype).name, num_actions=int(spec.num_actions),
                agent=entry.name, agent_title=entry.title, agent_settings=settings, network=config.network,
                dueling=bool(settings.get("dueling", False)), signature="serving_default",
                inputs=dict(observation="the environment's observations, batched"), outputs=greedy_outputs,
                signatures=signatures)


def main(argv) -> None:
    if len(argv) > 1:
        COMMAND.fail(f"unexpected arguments {' '.join(argv[1:])}")
    if not FLAGS.out:
        COMMAND.fail("--out: required (the folder to write the SavedModel to)")
    from hvd_dqn.logdir import checkpoint

    try:
        result = export(FLAGS.logdir, FLAGS.checkpoint, FLAGS.out, FLAGS.overwrite)
    except (checkpoint.CheckpointNotFound, ExportError) as error:
        COMMAND.fail(str(error))
    print(json.dumps(result, indent=2))



def run() -> None:
    COMMAND.run(main)


if __name__ == "__main__":
    run()
