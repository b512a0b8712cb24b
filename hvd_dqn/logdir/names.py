"""The names of what a logdir holds: its checkpoint folders and the marker that makes one complete.

Both the checkpoint files (`hvd_dqn.logdir.checkpoint`) and their copies in object storage
(`hvd_dqn.logdir.storage`) go by them.
"""
import os
import re

CHECKPOINT_NAME = re.compile(r"^ckpt-(\d{12})$")  # ckpt-<env steps, summed over ranks, 12 digits>
COMPLETE_MARKER = "COMPLETE"  # written last into a checkpoint folder; a folder without it is ignored


def checkpoint_root(logdir: str) -> str:
    return os.path.join(logdir, "checkpoints")


def checkpoint_name_matches(name: str) -> bool:
    """Whether `name` is a checkpoint folder's name (ckpt-<12 digits>)."""
    return bool(CHECKPOINT_NAME.match(name))


def checkpoint_name(env_steps: int) -> str:
    return f"ckpt-{int(env_steps):012d}"
