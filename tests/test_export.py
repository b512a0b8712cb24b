"""hvd_dqn.export: the SavedModel gives exactly the Keras network's actions, for each kind of observation, from
a real training run's checkpoint, and bad command lines get one line without touching an earlier export."""
import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from hvd_dqn.agent import reload
from hvd_dqn.agent.networks import build_q_network
from hvd_dqn.agent.serving import POLICY_INFO, save_greedy_policy
from hvd_dqn.logdir import checkpoint

from conftest import PYTHON, horovodrun, python_module


def _observations(shape, dtype, batch, rng):
    if dtype == np.uint8:
        return rng.integers(0, 256, size=(batch, *shape), dtype=np.uint8)
    if dtype == np.bool_:
        return rng.random((batch, *shape)) < 0.2
    return rng.normal(size=(batch, *shape)).astype(np.float32)


def _assert_same_policy(serve, network, observation):
    exported = serve(observation=tf.constant(observation))
    q_values = network(observation, training=False).numpy()
    assert exported["actions"].dtype == tf.int32 and exported["q_values"].dtype == tf.float32
    # The same graph on the same device: the Q-values agree to float32 rounding and the actions exactly.
    np.testing.assert_allclose(exported["q_values"].numpy(), q_values, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(exported["actions"].numpy(), q_values.argmax(axis=1))


@pytest.mark.parametrize("shape, dtype, network, dueling", [
    ((4,), np.float32, "mlp", False),
    ((4, 84, 84), np.uint8, "nature_cnn", True),
    ((10, 10, 4), np.bool_, "minatar_cnn", False),
], ids=["vector", "atari-frames-dueling", "minatar-grid"])
def test_saved_policy_acts_as_the_keras_network_on_every_observation_kind(tmp_path, shape, dtype, network, dueling):
    tf.keras.utils.set_random_seed(0)
    model = build_q_network(shape, dtype, 6, (32, 32), "online", dueling=dueling, network=network)
    save_greedy_policy(model, shape, tf.as_dtype(dtype), str(tmp_path / "policy"))
    serve = tf.saved_model.load(str(tmp_path / "policy")).signatures["serving_default"]
    rng = np.random.default_rng(1)
    for batch in (1, 7):
        _assert_same_policy(serve, model, _observations(shape, dtype, batch, rng))


def test_export_of_a_trained_checkpoint_and_its_errors(tmp_path):
    logdir, out = tmp_path / "run", tmp_path / "policy"
    horovodrun(1, [PYTHON, "-m", "hvd_dqn.train", f"--logdir={logdir}", "--env_id=CartPole-v1", "--num_envs=2",
                   "--learning_starts=200", "--batch_size=32", "--train_frequency=4", "--hidden_sizes=32,32",
                   "--total_env_steps=2000", "--checkpoint_interval_env_steps=2000", "--eval_interval_env_steps=0"],
               timeout=300)
    python_module("hvd_dqn.export", [f"--logdir={logdir}", f"--out={out}"], timeout=300)

    info = json.loads((out / POLICY_INFO).read_text())
    latest = checkpoint.latest_checkpoint(str(logdir))
    assert info["env_id"] == "CartPole-v1" and info["observation_shape"] == [4] and info["num_actions"] == 2
    assert info["observation_dtype"] == "float32" and info["env_steps"] == 2000 and info["checkpoint"] == latest
    # The SavedModel, loaded without hvd_dqn's code, against the network rebuilt from the same checkpoint.
    serve = tf.saved_model.load(str(out)).signatures["serving_default"]
    _, env, network = reload.load_online_network(latest)
    env.close()
    _assert_same_policy(serve, network, _observations((4,), np.float32, 256, np.random.default_rng(2)))

    # An existing export is kept unless --overwrite; the error is one line.
    marker = out / "kept"
    marker.write_text("earlier export")
    refused = python_module("hvd_dqn.export", [f"--logdir={logdir}", f"--out={out}"], check=False)
    assert refused.returncode == 2 and marker.exists()
    assert refused.stderr.strip().splitlines() == [
        f"hvd_dqn.export: error: --out={out}: already exists (choose another folder, or --overwrite to replace it)"]
    python_module("hvd_dqn.export", [f"--logdir={logdir}", f"--out={out}", "--overwrite"], timeout=300)
    assert not marker.exists() and (out / "saved_model.pb").exists()
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".policy.partial-")] == []

    empty, blocker = tmp_path / "empty", tmp_path / "a_file"
    empty.mkdir()
    blocker.write_text("not a folder")
    for args, message in [
        ([f"--logdir={empty}", f"--out={tmp_path / 'p2'}"],
         f"--logdir={empty}: no complete checkpoint under {empty / 'checkpoints'}"),
        ([f"--logdir={tmp_path / 'missing'}", f"--out={tmp_path / 'p2'}"], f"--logdir={tmp_path / 'missing'}: no such folder"),
        ([f"--logdir={logdir}"], "--out: required (the folder to write the SavedModel to)"),
        ([f"--logdir={logdir}", f"--out={blocker / 'p'}"], f"--out={blocker / 'p'}: {blocker} is a file, not a folder"),
    ]:
        result = python_module("hvd_dqn.export", args, check=False)
        assert result.returncode == 2, result
        assert result.stderr.strip().splitlines() == [f"hvd_dqn.export: error: {message}"]
    assert not (tmp_path / "p2").exists()


def test_the_documented_export_makes_its_folders_and_another_user_can_read_it(tmp_path):
    """`--out=policies/cartpole` as docs/training.md types it, where policies/ does not exist yet: the folders are
    made, and the export and the evaluation's video take the modes the user's umask gives (here 022: folders 755,
    files 644, where Python's temporary files would be 700 and 600), so a serving process of another user reads
    every file. The other user is `nobody`, where the tests run as root."""
    import os
    import shutil
    import stat
    import subprocess
    import tempfile

    logdir = tmp_path / "run"
    horovodrun(1, [PYTHON, "-m", "hvd_dqn.train", f"--logdir={logdir}", "--env_id=CartPole-v1", "--num_envs=2",
                   "--learning_starts=200", "--batch_size=32", "--train_frequency=4", "--hidden_sizes=32,32",
                   "--total_env_steps=1000", "--checkpoint_interval_env_steps=1000", "--eval_interval_env_steps=0"],
               timeout=300)
    shared = pathlib.Path(tempfile.mkdtemp(prefix="hvd_dqn_export_"))  # not under pytest's root-only folder
    shared.chmod(0o755)
    old_mask = os.umask(0o022)
    try:
        python_module("hvd_dqn.export", [f"--logdir={logdir}", "--out=policies/cartpole"], timeout=300, cwd=shared)
        python_module("hvd_dqn.evaluate", [f"--logdir={logdir}", "--episodes=1", f"--video={shared / 'cp.gif'}"],
                      timeout=300)
        out = shared / "policies" / "cartpole"
        files = [path for path in out.rglob("*") if path.is_file()] + [shared / "cp.gif"]
        folders = [shared / "policies", out] + [path for path in out.rglob("*") if path.is_dir()]
        assert (out / "saved_model.pb").exists() and len(files) >= 4
        assert {stat.S_IMODE(path.stat().st_mode) for path in folders} == {0o755}
        assert {stat.S_IMODE(path.stat().st_mode) for path in files} == {0o644}
        if os.geteuid() == 0:
            reader = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "cat", *map(str, files)]
            assert subprocess.run(reader, stdout=subprocess.DEVNULL, timeout=60).returncode == 0
    finally:
        os.umask(old_mask)
        shutil.rmtree(shared, ignore_errors=True)
