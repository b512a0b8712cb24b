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


def test_evaluate_and_export_skip_a_damaged_checkpoint_under_logdir_and_name_it_under_checkpoint(tmp_path):
    """A checkpoint whose data file was cut short: --logdir takes the newest one that loads and says which it
    skipped (as --resume does); --checkpoint is one line naming the file and the damage; nothing is deleted."""
    import json

    from conftest import PYTHON, horovodrun, python_module

    logdir = tmp_path / "run"
    horovodrun(1, [PYTHON, "-m", "hvd_dqn.train", f"--logdir={logdir}", "--env_id=CartPole-v1", "--num_envs=2",
                   "--learning_starts=200", "--batch_size=32", "--train_frequency=4", "--hidden_sizes=32,32",
                   "--total_env_steps=2000", "--checkpoint_interval_env_steps=1000", "--eval_interval_env_steps=0",
                   "--stop_at_train_return=inf"], timeout=300)
    older, newest = checkpoint.complete_checkpoints(str(logdir))
    data = [name for name in os.listdir(newest) if name.startswith("state.data")][0]
    os.truncate(os.path.join(newest, data), 100)

    report = tmp_path / "eval.json"
    result = python_module("hvd_dqn.evaluate", [f"--logdir={logdir}", "--episodes=1", f"--json={report}"],
                           timeout=300)
    assert json.loads(report.read_text())["checkpoint"] == older
    assert f"skipping checkpoint {newest}: damaged, it does not load (" in result.stderr
    out = tmp_path / "policy"
    result = python_module("hvd_dqn.export", [f"--logdir={logdir}", f"--out={out}"], timeout=300)
    assert json.loads((out / "hvd_dqn_policy.json").read_text())["checkpoint"] == older
    assert f"skipping checkpoint {newest}: damaged, it does not load (" in result.stderr

    for program, extra in (("hvd_dqn.evaluate", []), ("hvd_dqn.export", [f"--out={tmp_path / 'p2'}"])):
        result = python_module(program, [f"--checkpoint={newest}", *extra], timeout=300, check=False)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
        assert lines[0].startswith(f"{program}: error: --checkpoint={newest}: damaged, it does not load ("), lines
    assert not (tmp_path / "p2").exists()

    # Every checkpoint damaged: one line, and the files are all still there.
    data = [name for name in os.listdir(older) if name.startswith("state.data")][0]
    os.truncate(os.path.join(older, data), 100)
    result = python_module("hvd_dqn.evaluate", [f"--logdir={logdir}", "--episodes=1"], timeout=300, check=False)
    assert result.returncode == 2 and result.stderr.strip().splitlines()[-1] == (
        f"hvd_dqn.evaluate: error: --logdir={logdir}: none of the 2 complete checkpoints under "
        f"{logdir / 'checkpoints'} loads (see the warnings above); nothing was deleted")
    assert checkpoint.complete_checkpoints(str(logdir)) == [older, newest]
