"""PQN (--agent=pqn): Q(lambda) returns against a rollout worked by hand, LayerNorm networks, RAdam against its
formulas, the rollout's checkpoint, the one-line error for every DQN setting, equal replicas on 2 ranks (with
every minibatch shared, or whole minibatches per rank), a resume in the middle of a rollout that continues
exactly, and CartPole learnt."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from hvd_dqn.agent.numpy_forward import NumpyForward
from hvd_dqn.agent.policy import RolloutActor
from hvd_dqn.agent.networks import build_minatar_q_network, build_mlp_q_network, build_nature_cnn_q_network
from hvd_dqn.agent.pqn.learner import q_lambda_returns
from hvd_dqn.agent.dqn.settings import DoubleQSettings, ReplaySettings
from hvd_dqn.agent.configs import make_config, validate, with_settings
from hvd_dqn.config import ConfigError
from hvd_dqn.logdir import checkpoint
from hvd_dqn.agent.pqn.rank_share import minibatch_size, updates_per_rollout
from hvd_dqn.rank_split import check_world, learning_rate_at
from hvd_dqn.memories.rollout import Rollout

from conftest import PYTHON, REPO, episodes_without_wall_time, horovodrun, python_module

PRESET = f"--flagfile={REPO / 'configs' / 'cartpole_pqn.flags'}"


def test_q_lambda_returns_of_a_rollout_worked_by_hand():
    # One env, 5 steps: a termination at step 1, a truncation at step 3, the rollout's end at step 4.
    gamma, lam = 0.9, 0.5
    reward = np.array([[1.0], [2.0], [0.5], [1.0], [3.0]], np.float32)
    discount = np.array([[1.0], [0.0], [1.0], [1.0], [1.0]], np.float32)  # 0 after the termination only
    ended = np.array([[False], [True], [False], [True], [False]])
    value = np.array([[10.0], [99.0], [4.0], [6.0], [8.0]], np.float32)  # max Q of each true next observation
    g4 = 3.0 + 0.9 * 8.0  # the rollout's end: bootstrap fully
    g3 = 1.0 + 0.9 * 6.0  # truncated: bootstrap from the episode's last observation, nothing from step 4
    g2 = 0.5 + 0.9 * (0.5 * 4.0 + 0.5 * g3)
    g1 = 2.0  # terminated: the reward alone (V = 99 must not count)
    g0 = 1.0 + 0.9 * (0.5 * 10.0 + 0.5 * g1)
    np.testing.assert_allclose(q_lambda_returns(reward, discount, ended, value, gamma, lam)[:, 0],
                               [g0, g1, g2, g3, g4], rtol=1e-6)
    # lambda 0 is the one-step target everywhere; lambda 1 sums rewards to the episode's or rollout's end.
    np.testing.assert_allclose(q_lambda_returns(reward, discount, ended, value, gamma, 0.0)[:, 0],
                               [1 + 0.9 * 10, 2.0, 0.5 + 0.9 * 4, g3, g4], rtol=1e-6)
    np.testing.assert_allclose(q_lambda_returns(reward, discount, ended, value, gamma, 1.0)[:, 0],
                               [1 + 0.9 * 2.0, 2.0, 0.5 + 0.9 * g3, g3, g4], rtol=1e-6)


def test_q_lambda_returns_keep_envs_apart():
    rng = np.random.default_rng(0)
    reward, value = rng.normal(size=(6, 3)).astype(np.float32), rng.normal(size=(6, 3)).astype(np.float32)
    ended = rng.random((6, 3)) < 0.3
    discount = np.where(ended & (rng.random((6, 3)) < 0.5), 0.0, 1.0).astype(np.float32)
    together = q_lambda_returns(reward, discount, ended, value, 0.99, 0.65)
    for env in range(3):
        alone = q_lambda_returns(reward[:, env:env + 1], discount[:, env:env + 1], ended[:, env:env + 1],
                                 value[:, env:env + 1], 0.99, 0.65)
        np.testing.assert_allclose(together[:, env], alone[:, 0], rtol=1e-6)


@pytest.mark.parametrize("build, shape, norms", [
    (lambda norm: build_mlp_q_network((4,), 2, (120, 84), layer_norm=norm), (None, 4), 2),
    (lambda norm: build_minatar_q_network((10, 10, 4), 3, layer_norm=norm), (None, 10, 10, 4), 2),
    (lambda norm: build_nature_cnn_q_network((4, 84, 84), 4, layer_norm=norm), (None, 4, 84, 84), 4),
], ids=["mlp", "minatar_cnn", "nature_cnn"])
def test_layer_norm_networks_normalise_every_hidden_layer(build, shape, norms):
    model, plain = build(True), build(False)
    layers = [layer for layer in model.layers if isinstance(layer, tf.keras.layers.LayerNormalization)]
    assert len(layers) == norms and model.input_shape == shape and model.output_shape == plain.output_shape
    assert not [layer for layer in plain.layers if isinstance(layer, tf.keras.layers.LayerNormalization)]
    # LayerNorm adds a scale and an offset per normalised feature, and nothing else.
    assert model.count_params() == plain.count_params() + 2 * sum(layer.gamma.shape[0] for layer in layers)
    # Each hidden layer's output, normalised before its ReLU, has zero mean over its last axis.
    sample = np.random.default_rng(0).integers(0, 2, size=(2,) + shape[1:]).astype(model.input.dtype.name)
    for layer in layers:
        normalised = tf.keras.Model(model.input, layer.output)(sample).numpy()
        np.testing.assert_allclose(normalised.mean(axis=-1), 0.0, atol=1e-4)


def _radam_reference(gradients, lr=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-8):
    """Liu et al. 2020, Algorithm 2, written out in NumPy (optax.radam's threshold 5 and epsilon outside the root)."""
    variable, m, v = np.zeros_like(gradients[0]), np.zeros_like(gradients[0]), np.zeros_like(gradients[0])
    rho_infinity = 2 / (1 - beta_2) - 1
    for step, gradient in enumerate(gradients, 1):
        m = beta_1 * m + (1 - beta_1) * gradient
        v = beta_2 * v + (1 - beta_2) * gradient ** 2
        m_hat = m / (1 - beta_1 ** step)
        rho = rho_infinity - 2 * step * beta_2 ** step / (1 - beta_2 ** step)
        if rho > 5:
            rectifier = np.sqrt((rho - 4) * (rho - 2) * rho_infinity / ((rho_infinity - 4) * (rho_infinity - 2) * rho))
            variable = variable - lr * rectifier * m_hat / (np.sqrt(v / (1 - beta_2 ** step)) + epsilon)
        else:
            variable = variable - lr * m_hat
    return variable


@pytest.mark.parametrize("layer_norm", [True, False])
def test_numpy_acting_copy_computes_the_networks_q_values(layer_norm):
    network = build_mlp_q_network((4,), 2, (120, 84), layer_norm=layer_norm)
    copy = NumpyForward.of(network)
    observations = np.random.default_rng(3).normal(scale=3.0, size=(16, 4)).astype(np.float32)
    np.testing.assert_allclose(copy(observations), network(observations).numpy(), rtol=1e-5, atol=1e-5)
    # A network of other layers acts through TensorFlow.
    assert NumpyForward.of(build_minatar_q_network((10, 10, 4), 3, layer_norm=True)) is None
    assert NumpyForward.of(build_mlp_q_network((4,), 2, (64,), dueling=True)) is None


def test_rollout_actor_takes_new_weights_once_told_the_network_changed():
    network = build_mlp_q_network((4,), 2, (32,), layer_norm=True)
    actor = RolloutActor(network, 2, np.random.default_rng(0))
    observations = np.random.default_rng(1).normal(size=(64, 4)).astype(np.float32)
    before = actor.greedy_actions(observations)
    np.testing.assert_array_equal(before, np.argmax(network(observations).numpy(), axis=-1))
    head = network.layers[-1]
    head.set_weights([-weight for weight in head.get_weights()])  # every greedy action flips
    np.testing.assert_array_equal(actor.greedy_actions(observations), before)  # the copy of the rollout's start
    actor.network_changed()
    np.testing.assert_array_equal(actor.greedy_actions(observations), 1 - before)


def test_radam_follows_its_formulas_through_the_warm_phase_and_after():
    from hvd_dqn.agent.optimizers import RectifiedAdam

    gradients = np.random.default_rng(1).normal(size=(12, 5)).astype(np.float64)  # rho passes 5 at step 6
    variable = tf.Variable(np.zeros(5), dtype=tf.float64)
    optimizer = RectifiedAdam(learning_rate=0.01, epsilon=1e-8)
    for gradient in gradients:
        optimizer.apply_gradients([(tf.constant(gradient), variable)])
    # (float32 hyperparameters inside Keras leave differences of about 1e-7; a step without the rectifier, or the
    # rectifier in the first 5 steps, would be off by 10-90%.)
    np.testing.assert_allclose(variable.numpy(), _radam_reference(gradients), rtol=1e-5)
    # Horovod's DistributedOptimizer rebuilds it from its config.
    assert isinstance(RectifiedAdam.from_config(optimizer.get_config()), RectifiedAdam)


def test_a_rollout_checkpoints_exactly_and_refuses_another_shape(tmp_path):
    rollout, rng = Rollout(5, 2, (3,), np.float32), np.random.default_rng(0)
    for ended in ([True, False], [False, True], [False, False]):
        observation = rng.normal(size=(2, 3)).astype(np.float32)
        rollout.add(observation, rng.integers(0, 2, 2), rng.normal(size=2), np.ones(2), observation, ended)
    rollout.save(str(tmp_path / "shard.npz"), extra={"emulators": np.arange(4, dtype=np.uint8)})
    restored = Rollout(5, 2, (3,), np.float32)
    assert restored.load(str(tmp_path / "shard.npz"))["emulators"].tolist() == [0, 1, 2, 3]
    assert restored.digest() == rollout.digest() and len(restored) == 6 and not restored.full
    restored.cut_episodes()
    assert restored.ended[2].all() and restored.digest() != rollout.digest()
    with pytest.raises(ValueError, match=r"another --rollout_steps, --num_envs or environment"):
        Rollout(4, 2, (3,), np.float32).load(str(tmp_path / "shard.npz"))
    for _ in range(2):
        rollout.add(observation, [0, 1], [0.0, 0.0], [1.0, 1.0], observation, [False, False])
    with pytest.raises(RuntimeError, match="the rollout is full"):
        rollout.add(observation, [0, 1], [0.0, 0.0], [1.0, 1.0], observation, [False, False])


def test_every_replay_and_target_setting_is_named_in_one_line_with_pqn(tmp_path):
    """PQN has neither the replay memory's settings nor the target network's (the settings classes of the DQN
    family have them): each, changed from its default, is named with the agents it belongs to."""
    pqn = make_config(agent="pqn", layer_norm=True, logdir=str(tmp_path))
    validate(pqn)
    defaults = make_config()
    names = [field.name for settings in (ReplaySettings, DoubleQSettings) for field in dataclasses.fields(settings)]
    assert {"replay_capacity", "batch_size", "n_step", "double_dqn", "target_update_period"} <= set(names)
    for name in names:
        default = getattr(defaults, name)
        other = (not default if isinstance(default, bool) else "updates" if name == "rank_scaling"
                 else default / 2 if isinstance(default, float) else default + 1)
        owners = "DQN, QR-DQN, IQN and C51" if name == "double_dqn" else "DQN, QR-DQN, IQN, C51 and M-DQN"
        with pytest.raises(ConfigError, match=rf"^--{name}=\S+: a setting of {owners} \(.*\); --agent=pqn "
                                              r"learns from each rollout without a replay memory or target network"):
            make_config(agent="pqn", layer_norm=True, logdir=str(tmp_path), **{name: other})
    result = python_module("hvd_dqn.train", [PRESET, f"--logdir={tmp_path}", "--replay_capacity=1000"], timeout=120,
                           check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == ("hvd_dqn.train: error: --replay_capacity=1000: a setting of DQN, QR-DQN, IQN, "
                                     "C51 and M-DQN (the replay memory); --agent=pqn learns from each rollout without a replay "
                                     "memory or target network. Leave it out, or use --agent=dqn")
    for flags, message in ((["--pipeline=on"], "--pipeline=on: with --agent=pqn acting runs in order"),
                           (["--num_minibatches=3"], "--num_minibatches=3: each rank's rollout of 512 transitions "
                                                     "(--rollout_steps=128 x 4 envs) must split into that many equal "
                                                     "minibatches")):
        result = python_module("hvd_dqn.train", [PRESET, f"--logdir={tmp_path}", *flags], timeout=120, check=False)
        assert result.returncode == 2 and result.stderr.strip().startswith(f"hvd_dqn.train: error: {message}")


def test_whole_minibatches_make_n_times_fewer_updates_of_one_ranks_size():
    """CartPole's preset: a job rollout of 4 envs x 128 steps, 4 minibatches of 128, 4 passes. Shared, each of
    N ranks adds 128 / N to every one of the 16 updates; whole, each makes 4 / N minibatches of 128 per pass from
    its own rollout of 512 / N, the step size is N times larger and its decay counts N times fewer updates."""
    shared = make_config(agent="pqn", layer_norm=True, num_envs=4, rollout_steps=128, num_minibatches=4,
                         learning_rate_end=1e-9, lr_decay_updates=15616)
    whole = with_settings(shared, pqn_minibatches="whole")
    for ranks in (1, 2, 4):
        assert (minibatch_size(shared, ranks), updates_per_rollout(shared, ranks)) == (128 // ranks, 16)
        assert (minibatch_size(whole, ranks), updates_per_rollout(whole, ranks)) == (128, 16 // ranks)
        assert learning_rate_at(shared, ranks).decay_updates == 15616
        assert learning_rate_at(whole, ranks).decay_updates == 15616 // ranks
        assert (learning_rate_at(shared, ranks).scale, learning_rate_at(whole, ranks).scale) == (1.0, ranks)
        assert learning_rate_at(whole.replace(scale_lr_by_workers=False), ranks).scale == 1.0
    with pytest.raises(ConfigError, match=r"^--pqn_minibatches=whole: --num_minibatches=4 whole minibatches per "
                                          r"pass must split evenly over the 8 ranks"):
        check_world(whole.replace(num_envs=8), 8)
    for other, message in (({"agent": "dqn", "layer_norm": False, "learning_rate_end": None, "lr_decay_updates": 0},
                            r"^--pqn_minibatches=whole: a setting of PQN \(how its ranks share its minibatches\); "
                            r"--agent=dqn learns one Q-value per action"),
                           ({"counts_per_rank": True}, r"^--pqn_minibatches=whole: splits the job's rollout"),
                           ({"pqn_minibatches": "halves"}, r"^--pqn_minibatches=halves: must be one of shared, whole")):
        with pytest.raises(ConfigError, match=message):  # as the Runner changes a config the user named
            validate(with_settings(whole, given=("pqn_minibatches",), **other), check_logdir_writable=False)


SHORT = [PRESET, "--total_env_steps=3000", "--rollout_steps=32", "--lr_decay_updates=1000",
         "--epsilon_decay_env_steps=2000", "--log_interval_env_steps=500", "--stop_at_train_return=inf",
         "--deterministic_ops"]


def test_two_ranks_keep_equal_replicas_and_make_one_ranks_updates(tmp_path):
    """The job's 4 envs split 2 and 2: each rollout of the job is 4 x 32 = 128 transitions, each minibatch 32 of
    them, 16 from each rank; 4 passes of 4 minibatches per rollout, whatever the number of ranks."""
    horovodrun(2, [PYTHON, "-m", "hvd_dqn.train", *SHORT, f"--logdir={tmp_path}"], timeout=600)
    final = checkpoint.read_counters(checkpoint.latest_checkpoint(str(tmp_path)))
    assert final["env_steps"] == 3000 and final["updates"] == (3000 // 128) * 16
    assert len(set(final["replica_weight_digests"])) == 1


def test_two_ranks_of_whole_minibatches_keep_equal_replicas_and_make_half_the_updates(tmp_path):
    """--pqn_minibatches=whole on 2 ranks: each rank's rollout of 2 x 32 = 64 transitions makes 2 minibatches of
    32 per pass, averaged over the ranks: 8 updates per rollout of the job instead of 16, the replicas equal."""
    horovodrun(2, [PYTHON, "-m", "hvd_dqn.train", *SHORT, "--pqn_minibatches=whole", f"--logdir={tmp_path}"],
               timeout=600)
    final = checkpoint.read_counters(checkpoint.latest_checkpoint(str(tmp_path)))
    assert final["env_steps"] == 3000 and final["updates"] == (3000 // 128) * 8
    assert len(set(final["replica_weight_digests"])) == 1


def test_a_run_resumed_in_the_middle_of_a_rollout_is_the_run_that_never_stopped(tmp_path):
    """The checkpoint at 1,400 env steps falls 120 steps into a rollout of 128: with --checkpoint_replay it holds
    the rollout, the emulators and the RNGs, and the resumed run ends with the same weights and episodes."""
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    python_module("hvd_dqn.train", [*SHORT, f"--logdir={whole}"], timeout=300)
    python_module("hvd_dqn.train", [*SHORT, f"--logdir={stopped}", "--total_env_steps=1400"], timeout=300)
    middle = checkpoint.read_counters(checkpoint.latest_checkpoint(str(stopped)))
    assert middle["env_steps"] == 1400 and middle["updates"] == (1400 // 128) * 16
    python_module("hvd_dqn.train", [*SHORT, f"--logdir={stopped}", "--resume"], timeout=300)
    final, final_whole = (checkpoint.read_counters(checkpoint.latest_checkpoint(str(run))) for run in (stopped, whole))
    assert final["updates"] == final_whole["updates"] == (3000 // 128) * 16
    assert final["replica_weight_digests"] == final_whole["replica_weight_digests"]
    assert episodes_without_wall_time(stopped / "episodes.csv") == episodes_without_wall_time(whole / "episodes.csv")
