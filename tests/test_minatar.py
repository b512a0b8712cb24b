"""MinAtar (Young & Tian 2019): ids, bool grids stored bit-packed, the paper's network and optimizer, exactly;
and a short real training run that learns Breakout beyond a random policy."""
import json

import numpy as np
import pytest
import tensorflow as tf

from hvd_dqn.agent.optimizers import RootEpsilonRMSprop
from hvd_dqn.agent.networks import build_minatar_q_network, build_q_network
from hvd_dqn.envs import make_vector_env, spec_of
from hvd_dqn.memories.replay import ReplayMemory

from conftest import REPO, python_module

# Object channels per game (MinAtar's state_shape) and the minimal action sets of the v1 ids.
GAMES = [("Asterix", 4, 5), ("Breakout", 4, 3), ("Freeway", 7, 3), ("Seaquest", 10, 6), ("SpaceInvaders", 6, 4)]


@pytest.mark.parametrize("game, channels, minimal_actions", GAMES)
def test_minatar_ids_give_bool_grids_and_the_papers_six_actions(game, channels, minimal_actions):
    env = make_vector_env(f"MinAtar/{game}-v0", 2)
    spec = spec_of(env)
    assert spec == type(spec)((10, 10, channels), np.dtype(bool), 6)
    observation, _ = env.reset(seed=[1, 2])
    assert observation.shape == (2, 10, 10, channels) and observation.dtype == bool
    env.close()
    minimal = make_vector_env(f"MinAtar/{game}-v1", 1)
    assert spec_of(minimal).num_actions == minimal_actions
    minimal.close()


def test_minatar_episodes_end_and_autoreset_with_the_true_last_grid():
    env = make_vector_env("MinAtar/Breakout-v0", 1)
    env.reset(seed=[0])
    for _ in range(2000):  # random play loses the ball within a few hundred steps
        observation, _, terminated, truncated, info = env.step(np.random.default_rng(0).integers(0, 6, 1))
        if terminated[0]:
            assert info["_final_obs"][0] and info["final_obs"][0].shape == (10, 10, 4)
            break
    env.close()
    assert terminated[0] and not truncated[0]


def test_bool_grids_are_stored_bit_packed_and_come_back_exactly():
    rng = np.random.default_rng(0)
    memory = ReplayMemory(100, 2, (10, 10, 10), np.bool_, n_step=1)
    grids = [rng.random((2, 10, 10, 10)) < 0.2 for _ in range(4)]
    for step in range(3):
        memory.add(grids[step], [step, step], [1.0, 2.0], [1.0, 1.0], grids[step + 1], [False, False])
    batch = memory.gather(np.array([0, 1, 1]), np.array([0, 1, 2]))
    assert batch.observation_tm1.dtype == bool and batch.observation_tm1.shape == (3, 10, 10, 10)
    np.testing.assert_array_equal(batch.observation_tm1, [grids[0][0], grids[1][1], grids[2][1]])
    np.testing.assert_array_equal(batch.observation_t, [grids[1][0], grids[2][1], grids[3][1]])
    # 1,000 cells in 125 bytes, twice (s_t and s_t+1), plus action, reward, discount, ended, transition.
    assert memory.bytes_per_transition == 2 * 125 + 1 + 4 + 4 + 1 + 1


@pytest.mark.parametrize("channels", [4, 10])
def test_the_papers_network_one_convolution_then_128_units(channels):
    model = build_minatar_q_network((10, 10, channels), 6)
    # conv 3x3x C -> 16 (8x8 out, no padding), 1024 -> 128, 128 -> 6
    expected = (9 * channels * 16 + 16) + (8 * 8 * 16 * 128 + 128) + (128 * 6 + 6)
    assert model.count_params() == expected
    assert model.get_layer("conv").output.shape[1:] == (8, 8, 16)
    grids = np.random.default_rng(0).random((3, 10, 10, channels)) < 0.3
    assert model(grids).shape == (3, 6) and model.input.dtype == tf.bool
    auto = build_q_network((10, 10, channels), np.bool_, 6, (64,), "online")
    assert auto.count_params() == expected  # "auto" picks it for bool grids


def test_rmsprop_adds_epsilon_to_the_root_as_pytorch_does():
    """Three centred steps against PyTorch's RMSprop update written out in NumPy:
    v = a v + (1 - a) g^2; m = a m + (1 - a) g; w -= lr g / (sqrt(v - m^2) + eps)."""
    lr, rho, eps = 0.1, 0.95, 0.01
    weights = np.array([1.0, -2.0, 0.5], np.float32)
    variable = tf.Variable(weights)
    optimizer = RootEpsilonRMSprop(learning_rate=lr, rho=rho, epsilon=eps, centered=True)
    v, m, w = np.zeros(3), np.zeros(3), weights.astype(np.float64)
    for gradient in ([0.5, -1.0, 0.0], [0.2, 0.3, -4.0], [-0.1, 0.0, 2.0]):
        optimizer.apply_gradients([(tf.constant(gradient, tf.float32), variable)])
        g = np.array(gradient)
        v = rho * v + (1 - rho) * g**2
        m = rho * m + (1 - rho) * g
        w = w - lr * g / (np.sqrt(v - m**2) + eps)
        np.testing.assert_allclose(variable.numpy(), w, rtol=2e-5, atol=1e-6)
    # Keras' own RMSprop puts eps under the root: a visibly different step from the same state.
    keras_variable = tf.Variable(weights)
    tf.keras.optimizers.RMSprop(lr, rho=rho, epsilon=eps, centered=True).apply_gradients(
        [(tf.constant([0.5, -1.0, 0.0], tf.float32), keras_variable)])
    ours = tf.Variable(weights)
    RootEpsilonRMSprop(lr, rho=rho, epsilon=eps, centered=True).apply_gradients(
        [(tf.constant([0.5, -1.0, 0.0], tf.float32), ours)])
    assert not np.allclose(keras_variable.numpy(), ours.numpy(), rtol=1e-3)


def test_an_unknown_minatar_game_is_named(tmp_path):
    result = python_module("hvd_dqn.train", ["--env_id=MinAtar/Pong-v0", f"--logdir={tmp_path}"], timeout=120,
                           check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--env_id=MinAtar/Pong-v0: unknown environment id; did you mean MinAtar/" in result.stderr


def test_minatar_breakout_learns_beyond_random_play_within_a_small_budget(tmp_path):
    """The paper's DQN on MinAtar Breakout for 40k env steps (a few minutes on two cores) with the exploration
    squeezed into that budget. A random policy scores about 0.5 per episode (MinAtar's README); a learning
    agent must clearly beat it in its last 100 training episodes."""
    logdir = tmp_path / "run"
    python_module("hvd_dqn.train", [f"--flagfile={REPO / 'configs' / 'minatar.flags'}", f"--logdir={logdir}",
                                    "--total_env_steps=40000", "--epsilon_decay_env_steps=15000",
                                    "--checkpoint_interval_env_steps=0", "--seed=1"], timeout=900)
    rows = [line.split(",") for line in (logdir / "episodes.csv").read_text().splitlines()[1:]]
    returns = np.array([float(row[4]) for row in rows])
    assert len(returns) >= 100
    assert returns[-100:].mean() >= 2.0, returns[-100:].mean()
    assert json.loads((logdir / "config.json").read_text())["network"] == "minatar_cnn"
