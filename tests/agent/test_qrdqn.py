"""QR-DQN (--agent=qrdqn): its loss against values worked by hand, its targets and greedy policy on networks whose
outputs are set, quantile regression finding the quantiles of a known distribution, its one-line errors, and the
agent's CartPole preset learning (2 ranks in step, exact resume, evaluate and export: tests/agent/test_distributional.py)."""

import numpy as np
import pytest
import tensorflow as tf

from hvd_dqn.agent.networks import Head, build_mlp_q_network
from hvd_dqn.agent.qrdqn.agent import QRDQNAgent
from hvd_dqn.agent.qrdqn.learner import QuantileLearner, quantile_huber_loss, quantile_midpoints
from hvd_dqn.agent.configs import make_config
from hvd_dqn.agent.optimizers import make_optimizer

from conftest import REPO, assert_greedy_view_exports, train_error_line, train_and_check_learning

PRESET = f"--flagfile={REPO / 'configs' / 'cartpole_qrdqn.flags'}"


def test_quantile_midpoints_are_the_centres_of_n_equal_parts():
    np.testing.assert_allclose(quantile_midpoints(4), [0.125, 0.375, 0.625, 0.875])


@pytest.mark.parametrize("kappa, expected", [(1.0, 0.40625), (2.0, 0.234375)])
def test_quantile_huber_loss_against_values_worked_by_hand(kappa, expected):
    """Quantiles (0, 1) at levels (1/4, 3/4) against the target samples (0.5, 2).
    kappa 1: u = (0.5, 2) for quantile 0, all >= 0, weight 1/4: 1/4 * (0.125 + 1.5) / 2 = 0.203125; u = (-0.5, 1)
    for quantile 1, weights 1/4 and 3/4: (1/4 * 0.125 + 3/4 * 0.5) / 2 = 0.203125; sum 0.40625.
    kappa 2 (all |u| <= 2: quadratic), each divided by kappa: 1/4 * (0.125 + 2) / 2 / 2 = 0.1328125 and
    (1/4 * 0.125 + 3/4 * 0.5) / 2 / 2 = 0.1015625; sum 0.234375."""
    quantiles = tf.constant([[0.0, 1.0], [0.0, 1.0]])
    targets = tf.constant([[0.5, 2.0], [0.0, 1.0]])  # the second row: targets equal to the quantiles, loss 0
    loss = quantile_huber_loss(quantiles, tf.constant([0.25, 0.75]), targets, kappa).numpy()
    # Row 2: u = (0, 1) for quantile 0 (weight 1/4 on 0.5 / kappa), u = (-1, 0) for quantile 1 (weight 1/4).
    second = {1.0: (0.25 * 0.5 / 2 + 0.25 * 0.5 / 2), 2.0: (0.25 * 0.25 / 2 + 0.25 * 0.25 / 2)}[kappa]
    np.testing.assert_allclose(loss, [expected, second], rtol=1e-6)


def test_quantile_regression_finds_the_quantiles_of_a_known_distribution():
    """Minimising the loss against samples of a distribution moves each quantile to the distribution's quantile
    at its level: with a small kappa, to the empirical quantile of the samples, whatever the start."""
    samples = tf.constant(np.random.default_rng(0).exponential(2.0, size=(1, 4000)).astype(np.float32))
    taus = quantile_midpoints(5)
    theta = tf.Variable(tf.zeros((1, 5)))
    optimizer = tf.keras.optimizers.Adam(0.05)
    for _ in range(1500):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(quantile_huber_loss(theta, taus, samples, 0.01))
        optimizer.apply_gradients([(tape.gradient(loss, theta), theta)])
    expected = np.quantile(samples.numpy(), taus)
    np.testing.assert_allclose(theta.numpy()[0], expected, atol=0.05 * expected.max())
    assert np.all(np.diff(theta.numpy()[0]) > 0)


def _constant_network(quantiles_per_action, name):
    """A quantile network whose output is `quantiles_per_action` (actions, N) whatever the observation."""
    actions, atoms = np.shape(quantiles_per_action)
    network = build_mlp_q_network((2,), actions, (4,), name, head=Head(atoms=atoms))
    weights = [np.zeros_like(weight) for weight in network.get_weights()]
    weights[-1] = np.asarray(quantiles_per_action, np.float32).ravel()
    network.set_weights(weights)
    return network


def test_the_loss_reports_the_spread_of_each_taken_actions_quantiles():
    """The N quantiles are N equally likely returns: action 0's (-10, 0, 13) have the standard deviation
    sqrt(((-11)^2 + (-1)^2 + 12^2) / 3) = sqrt(266 / 3) about their mean 1; action 1's (2, 2, 2) none."""
    online = _constant_network([[-10.0, 0.0, 13.0], [2.0, 2.0, 2.0]], "online")
    learner = QuantileLearner(online, _constant_network([[0.0] * 3] * 2, "target"),
                              make_optimizer(make_config(), 1, distributed=False), double_dqn=False, kappa=1.0)
    _, q_taken, _, per_transition_metrics = learner._loss(tf.zeros((2, 2)), tf.constant([0, 1]),
                                                          tf.zeros((2, 3)), tf.ones(2))
    np.testing.assert_allclose(q_taken.numpy(), [1.0, 2.0], rtol=1e-6)
    np.testing.assert_allclose(per_transition_metrics["return_std"].numpy(), [np.sqrt(266.0 / 3.0), 0.0], atol=1e-5)


@pytest.mark.parametrize("double_dqn", [False, True])
def test_targets_bootstrap_from_the_action_greedy_on_the_mean_of_its_quantiles(double_dqn):
    """Action 0's quantiles (-10, 0, 13) have the largest quantile but the smaller mean (1) than action 1's
    (2, 2, 2): the target takes action 1's quantiles. With double DQN the online network chooses: its own means
    favour action 0 here, so action 0's target quantiles are taken."""
    target = _constant_network([[-10.0, 0.0, 13.0], [2.0, 2.0, 2.0]], "target")
    online = _constant_network([[5.0, 5.0, 5.0], [0.0, 0.0, 0.0]], "online")
    optimizer = make_optimizer(make_config(), 1, distributed=False)
    target_weights = target.get_weights()
    learner = QuantileLearner(online, target, optimizer, double_dqn=double_dqn, kappa=1.0)
    target.set_weights(target_weights)  # the learner copied online into target at start: put the target's back
    target_values = learner._targets(tf.constant([1.0, 0.5]), tf.constant([0.9, 0.0]), tf.zeros((2, 2))).numpy()
    chosen = np.array([-10.0, 0.0, 13.0]) if double_dqn else np.array([2.0, 2.0, 2.0])
    np.testing.assert_allclose(target_values, [1.0 + 0.9 * chosen, [0.5, 0.5, 0.5]], rtol=1e-6)


def test_the_greedy_policy_acts_on_the_mean_of_the_quantiles_and_exports_so(tmp_path):
    network = _constant_network([[-10.0, 0.0, 13.0], [2.0, 2.0, 2.0]], "online")
    q_network = QRDQNAgent.q_values(network)
    observation = np.random.default_rng(0).normal(size=(3, 2)).astype(np.float32)
    np.testing.assert_allclose(q_network(observation).numpy(), [[1.0, 2.0]] * 3, rtol=1e-6)
    assert_greedy_view_exports(q_network, network, observation, [1, 1, 1], tmp_path / "policy")


@pytest.mark.parametrize("flags, message", [
    (["--num_quantiles=1"], "--num_quantiles=1: must be an integer >= 2"),
    (["--kappa=0"], "--kappa=0.0: must be a number > 0"),
    (["--kappa=-1"], "--kappa=-1.0: must be a number > 0"),
    (["--loss=mse"], "--loss=mse: a setting of DQN, PQN and M-DQN (the TD loss on Q-values); --agent=qrdqn learns "
                     "quantiles of the return with the quantile Huber loss (--kappa). Leave it out, or use --agent=dqn"),
    (["--rollout_steps=64"], "--rollout_steps=64: a setting of PQN (PQN's rollout); --agent=qrdqn learns quantiles"),
    (["--agent=dqn"], "--num_quantiles=10: a setting of QR-DQN (the quantiles of the return); --agent=dqn learns "
                      "one Q-value per action. Leave it out, or use --agent=qrdqn"),
    (["--agent=iqm"], "--agent=iqm: unknown agent; did you mean --agent=iqn? the agents are dqn, qrdqn, iqn, c51, pqn, mdqn"),
], ids=["one-quantile", "kappa-0", "kappa-negative", "dqn-loss", "pqn-setting", "setting-for-dqn", "unknown-agent"])
def test_a_bad_setting_is_one_line(tmp_path, flags, message):
    line = train_error_line([PRESET, f"--logdir={tmp_path / 'run'}", *flags])
    assert line.startswith(f"hvd_dqn.train: error: {message}"), line


def test_cartpole_qrdqn_preset_learns(tmp_path):
    """The preset, seed 0, for 20,000 env steps: its last 100 training episodes, as played, average at least 120
    (random play: 22; conftest.LEARNS_ENV_STEPS says where its runs in results/cartpole_qrdqn/ stand then, and
    that folder holds the runs that solve CartPole, 475, within the preset's budget)."""
    train_and_check_learning(REPO / "configs" / "cartpole_qrdqn.flags", tmp_path / "run")
