"""The layer-wise trust ratio (--layer_adaptation, LAMB) on hand-made problems whose steps are known, and that
the optimizers without it step as before."""
import numpy as np
import pytest
import tensorflow as tf

from hvd_dqn.agent.configs import make_config
from hvd_dqn.agent.optimizers import Lamb, RectifiedAdam, RootEpsilonRMSprop, make_optimizer, trust_ratio


def _one_step(optimizer, weights, gradients):
    """The variables after one step of `optimizer` from `weights` under `gradients` (lists of arrays)."""
    variables = [tf.Variable(np.array(weight, dtype=np.float32)) for weight in weights]
    optimizer.apply_gradients([(tf.constant(np.array(gradient, dtype=np.float32)), variable)
                               for gradient, variable in zip(gradients, variables)])
    return [variable.numpy() for variable in variables]


def test_lambs_first_step_moves_each_variable_by_the_learning_rate_times_its_norm():
    """Adam's first direction is the gradient's sign (m_hat / sqrt(v_hat) = g / |g|). Kernel [3, 4] has norm 5 and
    direction [1, 0] of norm 1: the trust ratio 5 makes the step 0.1 x 5. A bias at zero keeps Adam's step."""
    kernel, bias = _one_step(Lamb(learning_rate=0.1, epsilon=1e-9, layer_adaptation=True),
                             [[3.0, 4.0], [0.0, 0.0]], [[2.0, 0.0], [1.0, -1.0]])
    np.testing.assert_allclose(kernel, [2.5, 4.0], rtol=1e-6)
    np.testing.assert_allclose(bias, [-0.1, 0.1], rtol=1e-6)


@pytest.mark.parametrize("optimizer", [
    lambda: Lamb(learning_rate=0.01, layer_adaptation=True),
    lambda: RectifiedAdam(learning_rate=0.01, layer_adaptation=True),
    lambda: RootEpsilonRMSprop(learning_rate=0.01, rho=0.95, epsilon=0.01, centered=True, layer_adaptation=True),
])
def test_with_layer_adaptation_every_layer_moves_by_the_same_fraction_of_its_norm(optimizer):
    """Two layers whose gradients differ a thousandfold in scale: each moves by 1% of its own norm."""
    rng = np.random.default_rng(0)
    weights = [rng.normal(size=(4, 3)), rng.normal(size=3) * 0.1]
    gradients = [rng.normal(size=(4, 3)) * 1000.0, rng.normal(size=3) * 0.001]
    after = _one_step(optimizer(), weights, gradients)
    for weight, moved in zip(weights, after):
        assert np.linalg.norm(weight - moved) == pytest.approx(0.01 * np.linalg.norm(weight), rel=1e-4)


def test_the_trust_ratio_is_one_where_a_norm_is_zero():
    assert float(trust_ratio(tf.zeros(3), tf.ones(3))) == 1.0
    assert float(trust_ratio(tf.ones(3), tf.zeros(3))) == 1.0
    assert float(trust_ratio(tf.constant([3.0, 4.0]), tf.constant([0.0, 0.5]))) == pytest.approx(10.0)


def test_rmsprop_without_layer_adaptation_steps_as_its_formula_to_the_bit():
    """MinAtar's runs repeat bit for bit only if the step is still lr * g / (sqrt(v - m^2) + eps), computed in
    that order."""
    gradient, weight = np.float32([0.3, -2.0]), np.float32([1.0, 1.0])
    [moved] = _one_step(RootEpsilonRMSprop(learning_rate=0.01, rho=0.95, epsilon=0.01, centered=True),
                        [weight], [gradient])
    rho = np.float32(0.95)
    v, m = (1 - rho) * gradient ** 2, (1 - rho) * gradient
    expected = weight - np.float32(0.01) * gradient / (np.sqrt(np.maximum(v - m ** 2, 0)) + np.float32(0.01))
    np.testing.assert_array_equal(moved, expected.astype(np.float32))


def test_the_setting_survives_horovods_rebuild_and_make_optimizer_picks_lamb_for_adam():
    """Horovod's DistributedOptimizer rebuilds the optimizer from its config."""
    for built in (make_optimizer(make_config(layer_adaptation=True), 1, distributed=False),
                  make_optimizer(make_config(optimizer="rmsprop", layer_adaptation=True), 1, distributed=False)):
        rebuilt = type(built).from_config(built.get_config())
        assert rebuilt.layer_adaptation and type(rebuilt) is type(built)
    assert isinstance(make_optimizer(make_config(layer_adaptation=True), 1, distributed=False), Lamb)
    plain = make_optimizer(make_config(), 1, distributed=False)
    assert type(plain) is tf.keras.optimizers.Adam  # without it, Keras' own Adam as before
