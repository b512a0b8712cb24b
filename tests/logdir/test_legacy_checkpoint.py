"""Checkpoints written by hvd_dqn's previous stack (TensorFlow 2.15.1 with its bundled Keras 2, NumPy 1.26) load
on today's (TensorFlow 2.18 with tf-keras, NumPy 2): the same Q-values, and a run resumes exactly where it
stopped, replay memory included. The checkpoint and how it was written: tests/data/tf2.15_cartpole/."""
import json
import shutil

import numpy as np

from hvd_dqn.agent.reload import load_online_network
from hvd_dqn.logdir.checkpoint import latest_checkpoint, read_counters

from conftest import REPO, python_module

LEGACY_RUN = REPO / "tests" / "data" / "tf2.15_cartpole"
LEGACY_CHECKPOINT = LEGACY_RUN / "checkpoints" / "ckpt-000000003000"
# The flags of the run that wrote it (under --rank_scaling=batch, the default then, whose counts were per rank:
# its config.json reads as --counts_per_rank); --total_env_steps and --checkpoint_interval_env_steps go on from there.
LEGACY_FLAGS = ["--rank_scaling=batch", "--counts_per_rank", "--env_id=CartPole-v1", "--num_envs=2", "--hidden_sizes=32,32", "--learning_starts=500",
                "--train_frequency=2", "--batch_size=32", "--replay_capacity=4000", "--checkpoint_replay",
                "--eval_interval_env_steps=0", "--log_interval_env_steps=1000", "--seed=7"]


def test_the_online_network_answers_as_it_did_under_tensorflow_2_15():
    written = json.loads((LEGACY_RUN / "q_values.json").read_text())
    assert written["tensorflow"] == "2.15.1"
    _, env, online = load_online_network(str(LEGACY_CHECKPOINT))
    env.close()
    q_values = online(np.asarray(written["observations"], np.float32)).numpy()
    np.testing.assert_allclose(q_values, written["q_values"], rtol=1e-5, atol=1e-6)


def test_a_run_resumes_from_a_tensorflow_2_15_checkpoint(tmp_path):
    logdir = tmp_path / "run"
    shutil.copytree(LEGACY_RUN / "checkpoints", logdir / "checkpoints")
    written = read_counters(str(LEGACY_CHECKPOINT))
    result = python_module("hvd_dqn.train", LEGACY_FLAGS + [
        f"--logdir={logdir}", "--resume", "--total_env_steps=4000", "--checkpoint_interval_env_steps=1000"],
        timeout=300)
    output = result.stdout + result.stderr
    # Every object in today's learner matched one in the file (restore asserts it), and the replay memory came
    # back bit for bit: its digest is the one the old stack recorded.
    resumed_from = logdir / "checkpoints" / LEGACY_CHECKPOINT.name
    assert f"resumed from {resumed_from} at 3,000 env steps, 1,251 updates" in output
    assert f"digests ['{written['rank_states'][0]['replay_digest']}']" in output
    assert "Traceback" not in output
    resumed = read_counters(latest_checkpoint(str(logdir)))
    assert (resumed["env_steps"], resumed["updates"]) == (4000, written["updates"] + 1000 // 2)
