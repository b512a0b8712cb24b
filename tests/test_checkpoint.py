"""Checkpoint folders: atomic naming, the COMPLETE marker, keeping the newest, exact round trips."""
import os

import numpy as np
import tensorflow as tf

from hvd_dqn.logdir import checkpoint


def _items(value):
    return {"weights": tf.Variable(np.full(3, value, np.float32)), "num_updates": tf.Variable(int(value), dtype=tf.int64)}


def test_save_then_restore_round_trips_values_and_counters(tmp_path):
    path = checkpoint.save(str(tmp_path), _items(7.0), {"env_steps": 1200, "updates": 7}, '{"env_id": "x"}', keep=3)
    assert os.path.basename(path) == "ckpt-000000001200"
    assert os.path.exists(os.path.join(path, checkpoint.COMPLETE_MARKER))
    target = _items(0.0)
    counters = checkpoint.restore(path, target)
    assert counters == {"env_steps": 1200, "updates": 7}
    np.testing.assert_array_equal(target["weights"].numpy(), [7.0, 7.0, 7.0])
    assert int(target["num_updates"].numpy()) == 7
    assert checkpoint.read_config_json(path) == '{"env_id": "x"}'


def test_only_the_newest_complete_checkpoints_are_kept(tmp_path):
    for steps in (100, 200, 300, 400):
        checkpoint.save(str(tmp_path), _items(steps), {"env_steps": steps}, "{}", keep=2)
    names = sorted(os.listdir(checkpoint.checkpoint_root(str(tmp_path))))
    assert names == ["ckpt-000000000300", "ckpt-000000000400"]


def test_a_folder_without_the_complete_marker_is_ignored(tmp_path):
    checkpoint.save(str(tmp_path), _items(1.0), {"env_steps": 100}, "{}", keep=5)
    newest = checkpoint.save(str(tmp_path), _items(2.0), {"env_steps": 200}, "{}", keep=5)
    os.remove(os.path.join(newest, checkpoint.COMPLETE_MARKER))  # as if the writer died before finishing
    latest = checkpoint.latest_checkpoint(str(tmp_path))
    assert latest is not None and latest.endswith("ckpt-000000000100")


def test_no_checkpoint_folder_means_none(tmp_path):
    assert checkpoint.latest_checkpoint(str(tmp_path / "missing")) is None
