"""Checkpoints of the learner and the run's counters, written by rank 0 only, atomically.

Layout under <logdir>/checkpoints/:

    ckpt-000000050000/          one folder per checkpoint, named by env steps (summed over ranks)
        state.index, state.data-*   tf.train.Checkpoint of online, target, optimizer, num_updates
        counters.json               env_steps, episodes, updates, each rank's RNG state, wall time, ...
        config.json                 the TrainConfig of the run that wrote it
        replay-rank00001.npz        with --checkpoint_replay: rank 1's replay memory (written by rank 1)
        COMPLETE                    written last: a folder without it is ignored

A checkpoint is first written into a hidden staging folder, then renamed into place, then marked COMPLETE
(as Dopamine's checkpointer does with its sentinel), so a crash mid-write never leaves a folder that looks
finished. The newest `keep` complete checkpoints are kept. With replay shards every rank writes its own
shard into the staging folder before rank 0 completes it.
"""
from __future__ import annotations

import json
import os
import shutil
from typing import Dict, List, Optional

# The names are shared with the object-store mirror (hvd_dqn.logdir.storage), which must not import this module.
from hvd_dqn.logdir.names import CHECKPOINT_NAME, COMPLETE_MARKER, checkpoint_name, checkpoint_root


class CheckpointError(Exception):
    """A checkpoint could not be written; the job stops with this message on rank 0."""


def complete_checkpoints(logdir: str) -> List[str]:
    """Paths of the complete checkpoints under `logdir`, oldest first."""
    root = checkpoint_root(logdir)
    if not os.path.isdir(root):
        return []
    found = []
    for name in os.listdir(root):
        match = CHECKPOINT_NAME.match(name)
        if match and os.path.exists(os.path.join(root, name, COMPLETE_MARKER)):
            found.append((int(match.group(1)), os.path.join(root, name)))
    return [path for _, path in sorted(found)]


def latest_checkpoint(logdir: str) -> Optional[str]:
    found = complete_checkpoints(logdir)
    return found[-1] if found else None


def staging_path(logdir: str, env_steps: int) -> str:
    """The hidden folder a checkpoint is assembled in; every rank can name it from the counters alone."""
    return os.path.join(checkpoint_root(logdir), f".staging-{checkpoint_name(env_steps)}")


def create_staging(logdir: str, env_steps: int) -> str:
    """Rank 0: an empty staging folder for the checkpoint at `env_steps` (a leftover one is cleared)."""
    staging = staging_path(logdir, env_steps)
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    return staging


def replay_shard_path(checkpoint_path: str, rank: int) -> str:
    return os.path.join(checkpoint_path, f"replay-rank{rank:05d}.npz")


def save(logdir: str, items: Dict[str, object], counters: dict, config_json: str, keep: int) -> str:
    """Completes the checkpoint named by counters["env_steps"] in its staging folder (created here unless
    the ranks already wrote replay shards into it), renames it into place and marks it COMPLETE; returns
    its path. Call on rank 0 only. On an error (a full disk) the staging folder is removed and the earlier
    checkpoints stay as they were."""
    root = checkpoint_root(logdir)
    os.makedirs(root, exist_ok=True)
    final = os.path.join(root, checkpoint_name(counters["env_steps"]))
    temporary = staging_path(logdir, counters["env_steps"])
    if not os.path.isdir(temporary):
        create_staging(logdir, counters["env_steps"])
    try:
        _write_into(temporary, items, counters, config_json)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    if os.path.exists(final):  # a re-run that reached the same step: the new one replaces it
        shutil.rmtree(final)
    os.rename(temporary, final)
    _write_text(os.path.join(final, COMPLETE_MARKER), "")
    for stale in complete_checkpoints(logdir)[:-keep]:
        shutil.rmtree(stale, ignore_errors=True)
    return final


def _write_into(temporary: str, items: Dict[str, object], counters: dict, config_json: str) -> None:
    import tensorflow as tf

    tf.train.Checkpoint(**items).write(os.path.join(temporary, "state"))
    _write_text(os.path.join(temporary, "counters.json"), json.dumps(counters, indent=2, sort_keys=True))
    _write_text(os.path.join(temporary, "config.json"), config_json)


def restore(path: str, items: Dict[str, object]) -> dict:
    """Loads the tracked objects in `items` from checkpoint folder `path`; returns its counters."""
    import tensorflow as tf

    status = tf.train.Checkpoint(**items).read(os.path.join(path, "state"))
    status.assert_existing_objects_matched()
    return read_counters(path)


class CheckpointNotFound(Exception):
    """No usable checkpoint where the user pointed; the message names the flag and the problem."""


def resolve(logdir: Optional[str], explicit: Optional[str]) -> str:
    """The checkpoint folder a command line names: `explicit` (--checkpoint) if given, which must be complete,
    else the newest complete one under `logdir` (--logdir)."""
    from hvd_dqn.logdir.storage import is_remote

    if is_remote(explicit) or (not explicit and is_remote(logdir)):
        return _fetch_remote(logdir, explicit)
    if explicit:
        if not os.path.exists(os.path.join(explicit, COMPLETE_MARKER)):
            raise CheckpointNotFound(f"--checkpoint={explicit}: not a complete checkpoint folder (no {COMPLETE_MARKER} "
                                     "marker)")
        return explicit
    if not logdir:
        raise CheckpointNotFound("--logdir: required (or --checkpoint)")
    if not os.path.isdir(logdir):
        raise CheckpointNotFound(f"--logdir={logdir}: no such folder")
    latest = latest_checkpoint(logdir)
    if latest is None:
        raise CheckpointNotFound(f"--logdir={logdir}: no complete checkpoint under {checkpoint_root(logdir)}")
    return latest


def _fetch_remote(logdir: Optional[str], explicit: Optional[str]) -> str:
    """`resolve` for object-store URLs: the checkpoint copied into a local folder (removed at exit)."""
    from hvd_dqn.logdir import storage

    flag = "--checkpoint" if explicit else "--logdir"
    try:
        if explicit:
            fs, root = storage.open_store(explicit)
            if not fs.exists(f"{root}/{COMPLETE_MARKER}"):
                raise CheckpointNotFound(f"--checkpoint={explicit}: not a complete checkpoint folder (no "
                                         f"{COMPLETE_MARKER} marker)")
            url = explicit
        else:
            found = storage.complete_checkpoints(logdir)
            if not found:
                raise CheckpointNotFound(f"--logdir={logdir}: no complete checkpoint under "
                                         f"{storage.join(logdir, 'checkpoints')}")
            url = found[-1]
        return storage.fetch_checkpoint(url, storage.scratch_folder("hvd_dqn_checkpoint_"))
    except storage.StorageError as error:
        raise CheckpointNotFound(f"{flag}={error}") from None


def first_line(error: BaseException) -> str:
    """The first line of an error's message (at most 200 characters), or its type's name where it has none:
    what a warning or an error line about a checkpoint that does not load says of the damage."""
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else type(error).__name__


def typed_first_line(error: BaseException) -> str:
    """`first_line`, led by the error's type (e.g. "IndexError: Read less bytes than requested")."""
    text = first_line(error)
    return text if text == type(error).__name__ else f"{type(error).__name__}: {text}"


def read_counters(path: str) -> dict:
    with open(os.path.join(path, "counters.json")) as handle:
        return json.load(handle)


def read_config_json(path: str) -> str:
    with open(os.path.join(path, "config.json")) as handle:
        return handle.read()


def _write_text(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
