"""TD targets, the Huber loss and the learner's update, with exact expected values."""
import numpy as np
import pytest
import tensorflow as tf

from hvd_dqn.agent.data_parallel_update import huber, td_loss
from hvd_dqn.agent.dqn.learner import DQNLearner, td_targets
from hvd_dqn.agent.configs import make_config
from hvd_dqn.agent.optimizers import make_optimizer
from hvd_dqn.agent.networks import build_mlp_q_network
from hvd_dqn.memories.replay import Batch

REWARD = tf.constant([1.0, 2.0, 0.5])
GAMMA = 0.9
# Three transitions, two actions.
Q_TARGET_T = tf.constant([[1.0, 3.0], [5.0, 2.0], [0.0, -1.0]])
Q_ONLINE_T = tf.constant([[4.0, 0.0], [0.0, 1.0], [-2.0, 5.0]])


@pytest.mark.parametrize("discount, expected", [
    # Non-terminal everywhere (a truncated step also has discount 1): r + 0.9 * max_a Q_target.
    ([1.0, 1.0, 1.0], [1.0 + 0.9 * 3.0, 2.0 + 0.9 * 5.0, 0.5 + 0.9 * 0.0]),
    # The second transition terminated: its target is the reward alone.
    ([1.0, 0.0, 1.0], [1.0 + 0.9 * 3.0, 2.0, 0.5 + 0.9 * 0.0]),
])
def test_dqn_targets_bootstrap_from_the_target_networks_max(discount, expected):
    targets = td_targets(REWARD, GAMMA * tf.constant(discount), Q_TARGET_T)
    np.testing.assert_allclose(targets.numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize("discount, expected", [
    # a* = argmax of the online net = [0, 1, 1]; valued by the target net: [1, 2, -1].
    ([1.0, 1.0, 1.0], [1.0 + 0.9 * 1.0, 2.0 + 0.9 * 2.0, 0.5 + 0.9 * -1.0]),
    ([0.0, 1.0, 0.0], [1.0, 2.0 + 0.9 * 2.0, 0.5]),
])
def test_double_dqn_targets_let_the_online_network_choose(discount, expected):
    targets = td_targets(REWARD, GAMMA * tf.constant(discount), Q_TARGET_T, Q_ONLINE_T)
    np.testing.assert_allclose(targets.numpy(), expected, rtol=1e-6)


def test_terminal_and_truncated_steps_differ_only_in_the_bootstrap():
    """Same transition, once ending by termination (discount 0), once by a time limit (discount 1)."""
    q_target = tf.constant([[2.0, 7.0]])
    terminal = td_targets(tf.constant([1.0]), tf.constant([0.0]), q_target)
    truncated = td_targets(tf.constant([1.0]), tf.constant([0.99]), q_target)
    assert terminal.numpy()[0] == pytest.approx(1.0)
    assert truncated.numpy()[0] == pytest.approx(1.0 + 0.99 * 7.0)


def test_huber_is_quadratic_inside_delta_and_linear_outside():
    values = huber(tf.constant([0.0, 0.5, -1.0, 2.0, -3.0]), delta=1.0).numpy()
    np.testing.assert_allclose(values, [0.0, 0.125, 0.5, 1.5, 2.5])
    np.testing.assert_allclose(huber(tf.constant([3.0]), delta=2.0).numpy(), [2.0 + 2.0 * 1.0])


def test_squared_loss_is_the_error_squared_without_a_half_as_dopamine():
    errors = tf.constant([0.0, 0.5, -1.0, 2.0, -3.0])
    np.testing.assert_allclose(td_loss(errors, "mse").numpy(), [0.0, 0.25, 1.0, 4.0, 9.0])
    np.testing.assert_allclose(td_loss(errors, "huber", 1.0).numpy(), huber(errors, 1.0).numpy())
    with pytest.raises(ValueError, match="unknown TD loss 'l1'"):
        td_loss(errors, "l1")


def _learner(double_dqn=True, loss="huber"):
    tf.keras.utils.set_random_seed(3)
    online = build_mlp_q_network((3,), 2, (8,), "online")
    target = build_mlp_q_network((3,), 2, (8,), "target")
    optimizer = make_optimizer(make_config(learning_rate=1e-2, max_grad_norm=0.0), 1, distributed=False)
    return DQNLearner(online, target, optimizer, double_dqn=double_dqn, loss=loss)


def _batch():
    rng = np.random.default_rng(0)
    return Batch(rng.normal(size=(5, 3)).astype(np.float32), np.array([0, 1, 1, 0, 1], np.int32),
                 rng.normal(size=5).astype(np.float32), np.array([0.9, 0, 0.9, 0.9, 0], np.float32),
                 rng.normal(size=(5, 3)).astype(np.float32))


@pytest.mark.parametrize("double_dqn", [False, True])
def test_update_reports_the_loss_of_the_weights_it_started_from(double_dqn):
    learner = _learner(double_dqn)
    batch = _batch()
    q_tm1 = learner.online(batch.observation_tm1).numpy()
    q_target_t = learner.target(batch.observation_t).numpy()
    selector = learner.online(batch.observation_t).numpy() if double_dqn else q_target_t
    bootstrap = q_target_t[np.arange(5), selector.argmax(axis=1)]
    td_error = batch.reward_t + batch.discount_t * bootstrap - q_tm1[np.arange(5), batch.action_tm1]
    expected_loss = np.mean(np.where(np.abs(td_error) <= 1, 0.5 * td_error**2, np.abs(td_error) - 0.5))
    before = [variable.numpy() for variable in learner.online.variables]
    metrics = learner.update(batch)
    assert metrics["td_loss"] == pytest.approx(expected_loss, rel=1e-5)
    np.testing.assert_allclose(metrics["td_errors"], td_error, rtol=1e-5, atol=1e-6)
    assert int(learner.num_updates.numpy()) == 1
    assert any(not np.array_equal(old, new.numpy()) for old, new in zip(before, learner.online.variables))


def test_squared_loss_update_reports_and_descends_the_mean_squared_td_error():
    learner = _learner(double_dqn=False, loss="mse")
    batch = _batch()
    q_tm1 = learner.online(batch.observation_tm1).numpy()
    bootstrap = learner.target(batch.observation_t).numpy().max(axis=1)
    td_error = batch.reward_t + batch.discount_t * bootstrap - q_tm1[np.arange(5), batch.action_tm1]
    # The gradient of mean(err^2) with respect to the chosen Q-values is -2 err / B (Huber's: -clip(err) / B).
    with tf.GradientTape() as tape:
        q_taken = tf.gather(learner.online(batch.observation_tm1), batch.action_tm1, axis=-1, batch_dims=1)
        expected = tf.reduce_mean(tf.square(tf.constant(td_error) + tf.constant(q_tm1[np.arange(5), batch.action_tm1]) - q_taken))
    gradients = tape.gradient(expected, learner.online.trainable_variables)
    before = [variable.numpy() for variable in learner.online.trainable_variables]
    metrics = learner.update(batch)
    assert metrics["td_loss"] == pytest.approx(np.mean(td_error**2), rel=1e-5)
    # One Adam step moves each weight against its gradient's sign (Adam's first step is lr * sign(g)).
    for old, new, gradient in zip(before, learner.online.trainable_variables, gradients):
        moved = np.abs(gradient.numpy()) > 1e-6
        np.testing.assert_array_equal(np.sign(old - new.numpy())[moved], np.sign(gradient.numpy())[moved])


def test_target_network_changes_only_when_synced():
    learner = _learner()
    learner.update(_batch())
    online = [variable.numpy() for variable in learner.online.variables]
    target = [variable.numpy() for variable in learner.target.variables]
    assert any(not np.array_equal(a, b) for a, b in zip(online, target))
    learner.sync_target()
    for online_variable, target_variable in zip(learner.online.variables, learner.target.variables):
        np.testing.assert_array_equal(online_variable.numpy(), target_variable.numpy())


def test_polyak_target_update_moves_the_target_part_of_the_way():
    learner = _learner()
    learner.update(_batch())
    online = [variable.numpy() for variable in learner.online.variables]
    before = [variable.numpy() for variable in learner.target.variables]
    learner.sync_target(0.25)
    for new, old, source in zip(learner.target.variables, before, online):
        np.testing.assert_allclose(new.numpy(), 0.25 * source + 0.75 * old, rtol=1e-6, atol=1e-7)
    assert any(not np.allclose(new.numpy(), source) for new, source in zip(learner.target.variables, online))


def test_importance_weights_scale_each_transitions_loss():
    learner = _learner()
    batch = _batch()
    q_tm1 = learner.online(batch.observation_tm1).numpy()
    q_target_t = learner.target(batch.observation_t).numpy()
    bootstrap = q_target_t[np.arange(5), learner.online(batch.observation_t).numpy().argmax(axis=1)]
    td_error = batch.reward_t + batch.discount_t * bootstrap - q_tm1[np.arange(5), batch.action_tm1]
    batch.weights = np.array([1.0, 0.5, 0.0, 0.25, 1.0], np.float32)
    per_transition = np.where(np.abs(td_error) <= 1, 0.5 * td_error**2, np.abs(td_error) - 0.5)
    metrics = learner.update(batch)
    assert metrics["td_loss"] == pytest.approx(np.mean(batch.weights * per_transition), rel=1e-5)


def test_rescaling_the_learning_rate_changes_the_step_of_the_distributed_optimizer():
    """--elastic with --scale_lr_by_workers: after a change of world the wrapped optimizer (which Horovod
    rebuilt from its config) takes steps of the new size. Adam's step under a constant gradient is exactly
    the learning rate, so the step sizes show the scale."""
    import horovod.tensorflow as hvd

    from hvd_dqn.agent.optimizers import rescale_learning_rate

    hvd.init()
    config = make_config(learning_rate=1e-2, max_grad_norm=0.0, elastic=True)
    optimizer = make_optimizer(config, 1)
    variable = tf.Variable([0.0])

    def step_size():
        before = float(variable.numpy()[0])
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(variable)
        optimizer.minimize(loss, [variable], tape=tape)
        return before - float(variable.numpy()[0])

    assert step_size() == pytest.approx(1e-2, rel=1e-4)  # one rank: the base rate
    assert rescale_learning_rate(optimizer, config, 3)
    assert step_size() == pytest.approx(3e-2, rel=1e-4)
    fixed = make_config(learning_rate=1e-2, max_grad_norm=0.0)
    assert not rescale_learning_rate(make_optimizer(fixed, 1), fixed, 3)  # fixed world: no schedule


def test_the_distributed_optimizer_takes_decaying_steps_with_learning_rate_end():
    """--learning_rate_end: Horovod rebuilds the wrapped optimizer from its config, and the rebuilt one must
    still decay. Adam's step under a constant gradient is exactly the learning rate of that update."""
    import horovod.tensorflow as hvd

    hvd.init()
    optimizer = make_optimizer(make_config(learning_rate=1e-2, max_grad_norm=0.0, learning_rate_end=1e-3,
                                           lr_decay_updates=3), 1)
    variable = tf.Variable([0.0])
    steps = []
    for _ in range(5):
        before = float(variable.numpy()[0])
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(variable)
        optimizer.minimize(loss, [variable], tape=tape)
        steps.append(before - float(variable.numpy()[0]))
    assert steps == pytest.approx([1e-2, 7e-3, 4e-3, 1e-3, 1e-3], rel=1e-4)


def test_the_update_from_compact_frames_equals_the_update_from_stacks():
    """The frame memory hands the learner (B, stack + n, H, W) frames and s_t+k's offset; the stacks built
    from them inside the update must be the ones NumPy builds, so both updates match."""
    from hvd_dqn.agent.networks import build_nature_cnn_q_network
    from hvd_dqn.memories.frames import FrameReplayMemory

    rng = np.random.default_rng(4)
    memory = FrameReplayMemory(400, 2, (84, 84), 4, n_step=3)
    for _ in range(150):  # episode ends so that some transitions have fewer than 3 steps
        ended = rng.random(2) < 0.1
        observation = rng.integers(0, 255, size=(2, 4, 84, 84)).astype(np.uint8)
        memory.add(observation, rng.integers(0, 4, 2), rng.normal(size=2), (~ended).astype(np.float32),
                   observation, ended)
    frames = memory.sample(16, rng)
    assert len(set(frames.next_offset.tolist())) > 1  # the offsets of s_t+k differ within the batch
    stacks = Batch(frames.observation_tm1, frames.action_tm1, frames.reward_t, frames.discount_t,
                   frames.observation_t)

    def learner():
        tf.keras.utils.set_random_seed(5)
        online, target = (build_nature_cnn_q_network((4, 84, 84), 4, name) for name in ("online", "target"))
        return DQNLearner(online, target, make_optimizer(make_config(), 1, distributed=False), True)

    from_frames, from_stacks = learner(), learner()
    one, other = from_frames.update(frames), from_stacks.update(stacks)
    np.testing.assert_array_equal(one["td_errors"], other["td_errors"])
    for a, b in zip(from_frames.online.variables, from_stacks.online.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_xla_compiled_update_matches_the_plain_one():
    """--xla compiles the networks' passes with XLA; the update is the same up to float rounding (XLA fuses
    and reorders arithmetic, so not bit for bit: which also shows the compiled path ran)."""
    from hvd_dqn.agent.networks import build_nature_cnn_q_network

    rng = np.random.default_rng(6)
    batch = Batch(rng.integers(0, 255, (8, 4, 84, 84)).astype(np.uint8), rng.integers(0, 4, 8).astype(np.int32),
                  rng.normal(size=8).astype(np.float32), np.full(8, 0.99, np.float32),
                  rng.integers(0, 255, (8, 4, 84, 84)).astype(np.uint8))
    learners = []
    for xla in (False, True):
        tf.keras.utils.set_random_seed(7)
        online, target = (build_nature_cnn_q_network((4, 84, 84), 4, name) for name in ("online", "target"))
        learners.append(DQNLearner(online, target, make_optimizer(make_config(), 1, distributed=False),
                                   double_dqn=True, xla=xla))
    plain, compiled = (learner.update(batch) for learner in learners)
    np.testing.assert_allclose(compiled["td_errors"], plain["td_errors"], rtol=1e-4, atol=1e-5)
    weights = [np.concatenate([v.numpy().ravel() for v in learner.online.variables]) for learner in learners]
    np.testing.assert_allclose(weights[1], weights[0], rtol=1e-4, atol=1e-6)
    assert not np.array_equal(plain["td_errors"], compiled["td_errors"]) or not np.array_equal(*weights)


def test_mixed_precision_computes_in_float16_and_keeps_q_values_and_weights_float32():
    import horovod.tensorflow as hvd

    from hvd_dqn.agent.networks import build_nature_cnn_q_network

    hvd.init()
    tf.keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        online, target = (build_nature_cnn_q_network((4, 84, 84), 4, name, dueling=True)
                          for name in ("online", "target"))
        learner = DQNLearner(online, target, make_optimizer(make_config(mixed_precision=True), 1),
                             double_dqn=True)
        assert learner.loss_scaling and online.get_layer("conv_0").compute_dtype == "float16"
        assert all(variable.dtype == tf.float32 for variable in online.variables)
        rng = np.random.default_rng(8)
        frames = rng.integers(0, 255, (8, 4, 84, 84)).astype(np.uint8)
        assert online(frames).dtype == tf.float32
        before = [variable.numpy() for variable in online.variables]
        metrics = learner.update(Batch(frames, rng.integers(0, 4, 8).astype(np.int32), np.ones(8, np.float32),
                                       np.full(8, 0.99, np.float32), frames[::-1].copy()))
        assert np.isfinite(metrics["td_loss"]) and float(learner.optimizer.loss_scale) > 1
        assert all(not np.array_equal(old, new.numpy()) for old, new in zip(before, online.trainable_variables))
    finally:
        tf.keras.mixed_precision.set_global_policy("float32")
