"""Munchausen DQN (--agent=mdqn): its targets against values worked by hand, its own settings as flags with one-line
refusals, and, under horovodrun, 2 ranks keeping one model, a resumed run equal to the run that never stopped,
evaluation and export; its CartPole preset learns."""
import json
import math

import numpy as np
import pytest
import tensorflow as tf

from hvd_dqn.agent.munchausen.learner import munchausen_targets, scaled_log_policy

from conftest import PYTHON, REPO, assert_two_ranks_resume_exactly, horovodrun, python_module, train_error_line, \
    train_and_check_learning

PRESET = f"--flagfile={REPO / 'configs' / 'cartpole_mdqn.flags'}"


def test_targets_match_values_worked_by_hand():
    """Two actions, tau 0.5, alpha 0.9, l0 -1, reward 1, discount 0.99. At s the target network's Q-values are
    (1, 2): pi(a=0|s) = e^2 / (e^2 + e^4) = 1 / (1 + e^2) = 0.1192, so tau log pi(0|s) = 0.5 ln 0.1192 = -1.0635,
    clipped to -1: a bonus of 0.9 x -1 = -0.9. At s' they are (0.5, 1.5): pi(s') = (0.1192, 0.8808) again, and its
    soft value sum_a pi (q - tau log pi) = 0.1192 (0.5 + 1.0635) + 0.8808 (1.5 + 0.0635) = 1.5635. The target:
    1 - 0.9 + 0.99 x 1.5635 = 1.6478. The action a=1 at s is not clipped: tau log pi(1|s) = 0.5 ln 0.8808 = -0.0635,
    a bonus of -0.0571 and a target of 2.4907. After a terminal (discount 0) only the reward and the bonus remain."""
    p0 = 1.0 / (1.0 + math.e ** 2)
    soft_value = p0 * (0.5 - 0.5 * math.log(p0)) + (1 - p0) * (1.5 - 0.5 * math.log(1 - p0))
    assert soft_value == pytest.approx(1.5635, abs=1e-4)
    q_s = tf.constant([[1.0, 2.0]] * 3)
    q_next = tf.constant([[0.5, 1.5]] * 3)
    targets = munchausen_targets(tf.constant([1.0, 1.0, 1.0]), tf.constant([0.99, 0.99, 0.0]), q_s,
                                 tf.constant([0, 1, 1]), q_next, tau=0.5, alpha=0.9, log_policy_clip=-1.0)
    bonus_1 = 0.9 * 0.5 * math.log(1 - p0)
    np.testing.assert_allclose(targets.numpy(), [1.0 - 0.9 + 0.99 * soft_value, 1.0 + bonus_1 + 0.99 * soft_value,
                                                 1.0 + bonus_1], rtol=1e-5)
    np.testing.assert_allclose(targets.numpy(), [1.6478, 2.4907, 0.9429], atol=1e-4)


def test_alpha_zero_is_soft_q_learning_and_a_cold_policy_bootstraps_from_the_max():
    """alpha 0 drops the bonus (soft DQN); as tau falls to 0 the soft value tends to max_a Q(s', a) (DQN's target),
    and the scaled log-policy stays finite where softmax(q / tau) would overflow."""
    q_s, q_next = tf.constant([[3.0, -2.0, 0.5]]), tf.constant([[10.0, 250.0, -40.0]])
    cold = munchausen_targets(tf.constant([0.5]), tf.constant([0.9]), q_s, tf.constant([2]), q_next, tau=1e-4,
                              alpha=0.0, log_policy_clip=-1.0)
    np.testing.assert_allclose(cold.numpy(), [0.5 + 0.9 * 250.0], rtol=1e-6)
    scaled = scaled_log_policy(tf.constant([[1000.0, 0.0]]), 1e-3).numpy()
    assert np.all(np.isfinite(scaled)) and scaled[0, 0] == 0.0 and scaled[0, 1] == pytest.approx(-1000.0)


@pytest.mark.parametrize("flags, message", [
    (["--double_dqn"], "--double_dqn=true: a setting of DQN, QR-DQN, IQN and C51 (the target network); --agent=mdqn "
                       "bootstraps from the soft value of its softmax policy with the Munchausen bonus. Leave it out, "
                       "or use --agent=dqn"),
    (["--entropy_temperature=0"], "--entropy_temperature=0.0: must be a number > 0"),
    (["--munchausen_scale=1.5"], "--munchausen_scale=1.5: must be in [0, 1]"),
    (["--log_policy_clip=0.5"], "--log_policy_clip=0.5: must be a number < 0"),
    (["--agent=dqn"], "--entropy_temperature=0.03: a setting of M-DQN (Munchausen DQN's softmax policy); --agent=dqn "
                      "learns one Q-value per action. Leave it out, or use --agent=mdqn"),
])
def test_a_bad_setting_is_one_line(tmp_path, flags, message):
    assert train_error_line([PRESET, f"--logdir={tmp_path}", *flags]) == f"hvd_dqn.train: error: {message}"


def test_helpfull_lists_its_settings_under_it():
    full = " ".join(python_module("hvd_dqn.train", ["--helpfull"], timeout=120, check=False).stdout.split())
    for name, default in (("entropy_temperature", "0.03"), ("munchausen_scale", "0.9"), ("log_policy_clip", "-1.0")):
        assert f"--{name}: M-DQN: " in full and f"[--agent=mdqn] (default: '{default}')" in full


SHORT = [PRESET, "--num_envs=4", "--learning_starts=400", "--batch_size=32", "--replay_capacity=4000",
         "--hidden_sizes=32,32", "--eval_interval_env_steps=0", "--stop_at_train_return=inf",
         "--log_interval_env_steps=500", "--checkpoint_interval_env_steps=1000", "--checkpoint_replay",
         "--priority_beta_start=0.5", "--priority_beta_end=0.5"]  # a fixed exponent: the halves equal the whole


def _train(logdir, *flags):
    horovodrun(2, [PYTHON, "-m", "hvd_dqn.train", *SHORT, f"--logdir={logdir}", *flags], timeout=600)


def test_two_ranks_train_one_model_resume_exactly_evaluate_and_export(tmp_path):
    whole = assert_two_ranks_resume_exactly(_train, tmp_path)
    saved = json.loads((whole / "config.json").read_text())
    assert (saved["agent"], saved["entropy_temperature"], saved["munchausen_scale"], saved["log_policy_clip"]) == \
        ("mdqn", 0.03, 0.9, -1.0)

    report = tmp_path / "eval.json"
    python_module("hvd_dqn.evaluate", [f"--logdir={whole}", "--episodes=4", f"--json={report}"], timeout=300)
    assert json.loads(report.read_text())["episodes"] == 4
    out = tmp_path / "policy"
    python_module("hvd_dqn.export", [f"--logdir={whole}", f"--out={out}"], timeout=300)
    served = tf.saved_model.load(str(out)).signatures["serving_default"](observation=tf.zeros((3, 4)))
    assert served["q_values"].shape == (3, 2) and np.all(np.isfinite(served["q_values"].numpy()))
    assert json.loads((out / "hvd_dqn_policy.json").read_text())["agent"] == "mdqn"


def test_cartpole_mdqn_preset_learns(tmp_path):
    """The preset, seed 0, for 20,000 env steps: its last 100 training episodes, as played, average at least 120
    (random play: 22; results/cartpole_mdqn/ holds the runs that solve CartPole, 475, within the preset's budget)."""
    train_and_check_learning(REPO / "configs" / "cartpole_mdqn.flags", tmp_path / "run")
