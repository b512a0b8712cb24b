"""IQN (--agent=iqn): its network's shapes and cosine embedding, the levels it samples (repeatable, its own per
rank), targets bootstrapped from the action greedy on the mean over levels (and, double, the online network's
choice) on networks whose outputs are set, the greedy policy on a fixed set of levels, its one-line errors, and its
CartPole preset learning. Two ranks, mixed precision, exact resume, evaluate and export: tests/agent/test_distributional.py."""

import numpy as np
import pytest
import tensorflow as tf

from hvd_dqn.agent.iqn.agent import IQNAgent
from hvd_dqn.agent.iqn.learner import ImplicitQuantileLearner
from hvd_dqn.agent.optimizers import make_optimizer
from hvd_dqn.agent.configs import make_config
from hvd_dqn.envs import EnvSpec

from conftest import REPO, train_error_line, train_and_check_learning

PRESET = f"--flagfile={REPO / 'configs' / 'cartpole_iqn.flags'}"
CONFIG = make_config(agent="iqn", env_id="CartPole-v1", hidden_sizes=(8, 8), num_tau_samples=4,
                     num_tau_prime_samples=5, num_quantile_samples=3, quantile_embedding_dim=6)
SPEC = EnvSpec(observation_shape=(2,), observation_dtype=np.float32, num_actions=2)


def _network(name, action_values=None):
    """An IQN network; with `action_values` every kernel is zero and the output is those values per action,
    whatever the observation and the levels."""
    network = IQNAgent.network(CONFIG, SPEC, name)
    if action_values is not None:
        weights = [np.zeros_like(weight) for weight in network.get_weights()]
        weights[-1] = np.asarray(action_values, np.float32)
        network.set_weights(weights)
    return network


def test_the_network_embeds_each_level_by_cosines_and_gives_values_per_level_and_action():
    # Seeded: a network 8 units wide can start with every ReLU on the path to the output dead for one observation,
    # and then all its values are 0 whatever the levels.
    tf.keras.utils.set_random_seed(0)
    network = _network("online")
    assert [tuple(shape) for shape in (network.inputs[0].shape, network.inputs[1].shape)] == [(None, 2), (None, None)]
    cosines = network.get_layer("tau_cosines")
    levels = np.array([[0.0, 0.25, 1.0]], np.float32)
    np.testing.assert_allclose(cosines(levels).numpy()[0], np.cos(np.pi * levels[0][:, None] * np.arange(1, 7)),
                               atol=1e-6)
    assert network.get_layer("tau_embedding").units == 8  # as wide as the torso's features
    rng = np.random.default_rng(0)
    observations = rng.normal(size=(3, 2)).astype(np.float32)
    values = network([observations, rng.random((3, 5)).astype(np.float32)]).numpy()
    assert values.shape == (3, 5, 2)
    assert np.any(values != 0)
    # Different levels give different values for each observation: the embedding reaches the output.
    for row in values:
        assert not np.allclose(row[0], row[1])


def test_the_greedy_policy_is_the_mean_over_evenly_spaced_levels_and_shares_the_weights():
    network = _network("online")
    q_network = IQNAgent.q_values(network)
    observation = np.random.default_rng(1).normal(size=(4, 2)).astype(np.float32)
    levels = np.tile(np.array([[1 / 6, 3 / 6, 5 / 6]], np.float32), (4, 1))  # K = 3 midpoints
    expected = network([observation, levels]).numpy().mean(axis=1)
    np.testing.assert_allclose(q_network(observation).numpy(), expected, rtol=1e-5, atol=1e-6)
    assert [variable.name for variable in q_network.variables] == [variable.name for variable in network.variables]


def test_levels_repeat_for_a_seed_and_update_and_differ_between_seeds():
    learner = ImplicitQuantileLearner.from_config(CONFIG, _network("o"), _network("t"), 1, distributed=False)
    first, again = learner._levels(3, 4, 0).numpy(), learner._levels(3, 4, 0).numpy()
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, learner._levels(3, 4, 1).numpy())  # another draw of the same update
    learner.num_updates.assign_add(1)
    assert not np.array_equal(first, learner._levels(3, 4, 0).numpy())  # the next update
    other = ImplicitQuantileLearner.from_config(CONFIG.replace(seed=1), _network("o2"), _network("t2"), 1,
                                                distributed=False)
    assert not np.array_equal(first, other._levels(3, 4, 0).numpy())
    assert np.all((first >= 0) & (first < 1))


@pytest.mark.parametrize("double_dqn", [False, True])
def test_targets_bootstrap_from_the_action_greedy_on_the_mean_over_levels(double_dqn):
    """The target network's values are 1 for action 0 and 2 for action 1 at every level: it chooses action 1.
    With double DQN the online network (5 and 0) chooses action 0, whose target values are taken."""
    target, online = _network("target", [1.0, 2.0]), _network("online", [5.0, 0.0])
    weights = target.get_weights()
    learner = ImplicitQuantileLearner(online, target, make_optimizer(CONFIG, 1, distributed=False), double_dqn,
                                      kappa=1.0, samples=(4, 5, 3))
    target.set_weights(weights)  # the learner copied online into target at start: put the target's back
    values = learner._targets(tf.constant([1.0, 0.5]), tf.constant([0.9, 0.0]), tf.zeros((2, 2))).numpy()
    chosen = 1.0 if double_dqn else 2.0
    np.testing.assert_allclose(values, [[1.0 + 0.9 * chosen] * 5, [0.5] * 5], rtol=1e-6)


@pytest.mark.parametrize("flags, message", [
    (["--num_tau_samples=0"], "--num_tau_samples=0: must be a positive integer"),
    (["--quantile_embedding_dim=0"], "--quantile_embedding_dim=0: must be a positive integer"),
    (["--kappa=0"], "--kappa=0.0: must be a number > 0"),
    (["--dueling"], "--dueling=true: a setting of DQN, QR-DQN, C51, PQN and M-DQN (the Q-network's heads); --agent=iqn learns"),
    (["--num_quantiles=8"], "--num_quantiles=8: a setting of QR-DQN (the quantiles of the return); --agent=iqn"),
    # The preset names --kappa (at its default) before IQN's own settings: named, it is refused first.
    (["--agent=dqn"], "--kappa=1.0: a setting of QR-DQN and IQN (the quantile Huber loss); --agent=dqn learns one "
                      "Q-value per action. Leave it out, or use --agent=qrdqn"),
], ids=["no-taus", "no-cosines", "kappa-0", "dueling", "qrdqn-setting", "setting-for-dqn"])
def test_a_bad_setting_is_one_line(tmp_path, flags, message):
    line = train_error_line([PRESET, f"--logdir={tmp_path / 'run'}", *flags])
    assert line.startswith(f"hvd_dqn.train: error: {message}"), line


def test_cartpole_iqn_preset_learns(tmp_path):
    """The preset, seed 0, for 20,000 env steps: its last 100 training episodes, as played, average at least 120
    (random play: 22; conftest.LEARNS_ENV_STEPS says where its runs in results/cartpole_iqn/ stand then, and
    that folder holds the runs that solve CartPole, 475, within the preset's budget)."""
    train_and_check_learning(REPO / "configs" / "cartpole_iqn.flags", tmp_path / "run")
