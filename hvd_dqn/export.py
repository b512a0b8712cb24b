"""Exports a trained agent's greedy policy as a TensorFlow SavedModel, to serve without hvd_dqn:

    python -m hvd_dqn.export --logdir=runs/pong --out=policies/pong

Loads the newest complete checkpoint in --logdir that reads back (skipping, with a warning, any that is
damaged), or --checkpoint, rebuilds the online Q-network from the
config stored beside it, and writes a SavedModel whose `serving_default` signature takes a batch of
observations exactly as the environment returns them (uint8 frame stacks (B, 4, 84, 84) for Atari, bool grids
(B, 10, 10, C) for MinAtar, float32 vectors for classic control) and returns

    actions   int32 (B,)          argmax_a Q(s, a): the greedy action, ties to the lowest index as in training
    q_values  float32 (B, actions)

Load it with `tf.saved_model.load(OUT).signatures["serving_default"](observation=...)`, TensorFlow Serving
or any SavedModel runtime. OUT/hvd_dqn_policy.json says what the policy expects (env id, observation shape
and dtype, number of actions, the checkpoint and its env steps). The export is written beside OUT and renamed
into place when complete, so OUT is never half written; an existing OUT is kept unless --overwrite is given.
Runs in one process; Horovod is not needed.
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
flags.DEFINE_string("out", None, "Folder the SavedModel is written to (must not exist unless --overwrite).")
flags.DEFINE_boolean("overwrite", False, "Replace --out if it exists (only once the new export is complete).")
FLAGS = flags.FLAGS


class ExportError(Exception):
    pass


def export(logdir: Optional[str], explicit: Optional[str], out: str, overwrite: bool = False) -> dict:
    """Writes the greedy policy of the checkpoint --logdir/--checkpoint name (`reload.load_named_checkpoint`)
    to `out` as a SavedModel; returns what hvd_dqn_policy.json holds."""
    import numpy as np
    import tensorflow as tf

    from hvd_dqn.agent import reload
    from hvd_dqn.agent.serving import POLICY_INFO, save_greedy_policy
    from hvd_dqn.envs import spec_of

    out = os.path.abspath(out)
    if os.path.exists(out) and not overwrite:
        raise ExportError(f"--out={out}: already exists (choose another folder, or --overwrite to replace it)")
    parent = os.path.dirname(out)
    if not os.path.isdir(parent):
        raise ExportError(f"--out={out}: folder {parent} does not exist")
    checkpoint_path, config, env, online, counters = reload.load_named_checkpoint(logdir, explicit)
    spec = spec_of(env)
    env.close()
    info = dict(env_id=config.env_id, observation_shape=list(spec.observation_shape),
                observation_dtype=np.dtype(spec.observation_dtype).name, num_actions=int(spec.num_actions),
                network=config.network, dueling=config.dueling, checkpoint=os.path.abspath(checkpoint_path),
                env_steps=counters["env_steps"], updates=counters["updates"], signature="serving_default",
                inputs=dict(observation="the environment's observations, batched"),
                outputs=dict(actions="int32 (B,): greedy actions", q_values="float32 (B, num_actions)"))
    try:
        staging = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.partial-", dir=parent)
    except OSError as error:
        raise ExportError(f"--out={out}: cannot write into {parent} ({error.strerror})") from None
    try:
        save_greedy_policy(online, spec.observation_shape, tf.as_dtype(spec.observation_dtype), staging)
        with open(os.path.join(staging, POLICY_INFO), "w") as handle:
            json.dump(info, handle, indent=2)
            handle.write("\n")
        if os.path.exists(out):  # --overwrite: the old export goes only now that the new one is complete
            shutil.rmtree(out)
        os.rename(staging, out)
    except OSError as error:
        raise ExportError(f"--out={out}: cannot write the SavedModel ({error.strerror or error})") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone already after the rename; a failed export's leftovers
    return dict(info, out=out)


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
