"""Noisy networks (--noisy_nets, Fortunato et al. 2018): the factorised noise of a layer, its initial values, the
noise off for evaluation and export, fresh and repeatable noise in the learner and the actor, and no epsilon."""

import numpy as np
import pytest
import tensorflow as tf

from hvd_dqn.agent.dqn.agent import DQNAgent
from hvd_dqn.agent.dqn.learner import DQNLearner
from hvd_dqn.agent.noisy import NoisyDense, is_noisy, tiled_seed
from hvd_dqn.agent.optimizers import make_optimizer
from hvd_dqn.agent.policy import NoisyNetworkActor
from hvd_dqn.agent.configs import make_config
from hvd_dqn.envs import EnvSpec
from hvd_dqn.memories.replay import Batch

SPEC = EnvSpec((4,), np.float32, 3)


def _layer(fan_in=6, units=4, sigma0=0.5):
    layer = NoisyDense(units, sigma0, name="noisy")
    layer([tf.zeros((1, fan_in)), tiled_seed([0, 0], 1)])
    return layer


def test_a_layer_starts_as_the_paper_says():
    """mu uniform in [-1/sqrt(p), 1/sqrt(p)], sigma = sigma0 / sqrt(p) (Fortunato et al. 2018, section 3.2)."""
    tf.keras.utils.set_random_seed(0)
    layer = _layer(fan_in=16, units=8, sigma0=0.5)
    bound = 1 / np.sqrt(16)
    for mu in (layer.kernel_mu.numpy(), layer.bias_mu.numpy()):
        assert np.all(np.abs(mu) <= bound) and mu.std() > bound / 4  # spread over the interval, not all zero
    np.testing.assert_allclose(layer.kernel_sigma.numpy(), 0.5 / 4)
    np.testing.assert_allclose(layer.bias_sigma.numpy(), 0.5 / 4)
    assert len(layer.trainable_variables) == 4 and not layer.non_trainable_variables  # the noise is no variable


def test_the_noise_is_factorised_and_off_for_a_negative_seed():
    """Output minus the means' output is x (sigma_W * f(eps_in) f(eps_out)^T) + sigma_b * f(eps_out): with sigma
    set to ones, a rank-1 kernel noise whose column factor is also the bias noise. A seed whose first half is
    negative gives the means alone."""
    layer = _layer()
    layer.kernel_sigma.assign(tf.ones_like(layer.kernel_sigma))
    layer.bias_sigma.assign(tf.ones_like(layer.bias_sigma))
    x = tf.eye(6)  # each row reads one row of the kernel
    means = tf.matmul(x, layer.kernel_mu) + layer.bias_mu
    noise_off = layer([x, tiled_seed([-1, 7], 6)])
    np.testing.assert_allclose(noise_off.numpy(), means.numpy(), atol=1e-6)
    input_noise, output_noise = layer.noise(tf.constant([3, 7], tf.int64))
    noisy = layer([x, tiled_seed([3, 7], 6)]).numpy() - means.numpy()
    expected = np.outer(input_noise, output_noise) + output_noise.numpy()[None, :]
    np.testing.assert_allclose(noisy, expected, atol=1e-5)
    assert np.linalg.matrix_rank(noisy - output_noise.numpy()[None, :], tol=1e-5) == 1
    draws = tf.random.stateless_normal([10], seed=tf.random.experimental.stateless_fold_in([3, 7], layer.layer_key))
    np.testing.assert_allclose(input_noise, np.sign(draws[:6]) * np.sqrt(np.abs(draws[:6])), rtol=1e-6)  # f(x)


def test_the_noise_depends_on_the_seed_alone_and_gradients_reach_sigma():
    layer = _layer()
    x = tf.ones((2, 6))
    first = layer([x, tiled_seed([5, 1], 2)])
    np.testing.assert_array_equal(first.numpy(), layer([x, tiled_seed([5, 1], 2)]).numpy())
    assert not np.allclose(first.numpy(), layer([x, tiled_seed([5, 2], 2)]).numpy())
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer([x, tiled_seed([5, 1], 2)]) ** 2)
    gradients = tape.gradient(loss, [layer.kernel_sigma, layer.bias_sigma])
    assert all(float(tf.reduce_sum(tf.abs(gradient))) > 0 for gradient in gradients)


def test_a_noisy_q_network_acts_on_its_means_in_evaluation_and_explores_in_training():
    """Evaluation's Q-network (the class's `q_values`) is the means': the same every call. The noisy view takes
    a seed; training's epsilon is 0 throughout."""
    config = make_config(noisy_nets=True, hidden_sizes=(16,))
    network = DQNAgent.network(config, SPEC, "online")
    assert is_noisy(network) and not is_noisy(DQNAgent.network(make_config(hidden_sizes=(16,)), SPEC, "plain"))
    assert sum(isinstance(layer, NoisyDense) for layer in network.layers) == 2  # the hidden and the output layer
    q_values = DQNAgent.q_values(network)
    observation = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    np.testing.assert_array_equal(q_values(observation).numpy(), q_values(observation).numpy())
    noisy = DQNAgent.q_values_of(network, network)
    np.testing.assert_allclose(noisy([observation, tiled_seed([-1, 0], 5)]).numpy(), q_values(observation).numpy())
    assert not np.allclose(noisy([observation, tiled_seed([1, 0], 5)]).numpy(), q_values(observation).numpy())

    actor = NoisyNetworkActor(noisy, SPEC.num_actions, np.random.default_rng(1))
    again = NoisyNetworkActor(noisy, SPEC.num_actions, np.random.default_rng(1))
    # A strong sigma makes the actions differ between steps; the same generator repeats them.
    for layer in network.layers:
        if isinstance(layer, NoisyDense):
            layer.kernel_sigma.assign(tf.ones_like(layer.kernel_sigma) * 3.0)
    steps = [actor.select_actions(observation, 0.0) for _ in range(8)]
    np.testing.assert_array_equal(steps, [again.select_actions(observation, 0.0) for _ in range(8)])
    assert len({tuple(step) for step in steps}) > 1
    schedule = DQNAgent.epsilon_schedule(type("Agent", (), {"config": config})())
    assert schedule(0) == 0.0 and schedule(10 ** 6) == 0.0


def _learner(seed):
    tf.keras.utils.set_random_seed(0)
    config = make_config(noisy_nets=True, hidden_sizes=(16,))
    learner = DQNLearner.from_config(config, DQNAgent.network(config, SPEC, "online"),
                                     DQNAgent.network(config, SPEC, "target"), 1, distributed=False)
    learner.seed = seed
    return learner


def _batch():
    rng = np.random.default_rng(0)
    return Batch(observation_tm1=rng.normal(size=(8, 4)).astype(np.float32),
                 action_tm1=rng.integers(0, 3, 8).astype(np.int32),
                 reward_t=np.ones(8, np.float32), discount_t=np.full(8, 0.9, np.float32),
                 observation_t=rng.normal(size=(8, 4)).astype(np.float32), weights=None, indices=None)


def test_the_learner_draws_fresh_noise_each_update_repeatably_and_per_seed():
    """Two learners of one seed make the same updates; each update's loss uses noise of its own (the same weights
    give another loss at the next update count); another seed (another rank) draws other noise."""
    first, same, other = _learner(11), _learner(11), _learner(12)
    losses = [[learner.update(_batch())["td_loss"] for _ in range(3)] for learner in (first, same, other)]
    assert losses[0] == losses[1]
    assert losses[0] != losses[2]
    for learner in (first, same):
        np.testing.assert_array_equal(first.online.get_weights()[0], learner.online.get_weights()[0])
    observation = tf.constant(_batch().observation_tm1)
    at_update = [first._online_forward(observation, training=True).numpy()]
    first.num_updates.assign_add(1)
    at_update.append(first._online_forward(observation, training=True).numpy())
    assert not np.allclose(*at_update)
    np.testing.assert_array_equal(first._target_forward(observation, training=False).numpy(),
                                  first._target_forward(observation, training=False).numpy())


@pytest.mark.parametrize("agent", ["dqn", "qrdqn", "c51"])
def test_every_agent_on_these_networks_builds_them_noisy(agent):
    from hvd_dqn.agent.factory import agent_class

    own = {"qrdqn": {"num_quantiles": 4}, "c51": {"num_atoms": 5}}.get(agent, {})
    config = make_config(agent=agent, noisy_nets=True, hidden_sizes=(8,), **own)
    network = agent_class(config).network(config, SPEC, "online")
    assert is_noisy(network)
    q_values = agent_class(config).q_values(network)
    assert q_values(np.zeros((2, 4), np.float32)).shape == (2, 3)
