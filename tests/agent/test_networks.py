"""Q-networks: the Nature CNN's shape and uint8 input, and dueling heads combining V and A exactly."""
import numpy as np
import pytest
import tensorflow as tf

from hvd_dqn.agent.networks import build_mlp_q_network, build_nature_cnn_q_network, build_q_network


def _streams(model, observation):
    value_model = tf.keras.Model(model.inputs, [model.get_layer("value").output, model.get_layer("advantage").output])
    return [output.numpy() for output in value_model(observation)]


def test_dueling_mlp_is_value_plus_advantage_minus_its_mean():
    tf.keras.utils.set_random_seed(0)
    model = build_mlp_q_network((4,), 3, (16, 16), dueling=True)
    observation = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    value, advantage = _streams(model, observation)
    assert value.shape == (5, 1) and advantage.shape == (5, 3)
    np.testing.assert_allclose(model(observation).numpy(), value + advantage - advantage.mean(axis=1, keepdims=True),
                               rtol=1e-6, atol=1e-6)


def test_dueling_nature_cnn_has_two_512_unit_streams():
    tf.keras.utils.set_random_seed(0)
    plain = build_nature_cnn_q_network((4, 84, 84), 6)
    dueling = build_nature_cnn_q_network((4, 84, 84), 6, dueling=True)
    assert plain.count_params() == 1_687_206  # Mnih et al. 2015 for 6 actions
    # A second 3136 -> 512 layer, and a value output of 1 where the plain net had 6 Q outputs.
    assert dueling.count_params() - plain.count_params() == (3136 * 512 + 512) + (512 + 1)
    frames = np.random.default_rng(0).integers(0, 256, size=(2, 4, 84, 84), dtype=np.uint8)
    value, advantage = _streams(dueling, frames)
    np.testing.assert_allclose(dueling(frames).numpy(), value + advantage - advantage.mean(axis=1, keepdims=True),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape, dtype, kind", [((4,), np.float32, "mlp"), ((4, 84, 84), np.uint8, "cnn")])
def test_build_q_network_picks_the_network_for_the_observation(shape, dtype, kind):
    model = build_q_network(shape, dtype, 2, (8,), "online", dueling=True)
    assert model.input.dtype == tf.as_dtype(dtype) and model.output.shape[-1] == 2
    assert ("conv_0" in [layer.name for layer in model.layers]) == (kind == "cnn")


def test_same_padding_builds_dopamines_larger_nature_cnn():
    """Flax pads "SAME" by default: Dopamine's JAX Nature CNN maps 84x84 to 21, 11 and 11 cells."""
    model = build_nature_cnn_q_network((4, 84, 84), 4, padding="same")
    assert [model.get_layer(f"conv_{index}").output.shape[1:3] for index in range(3)] == [(21, 21), (11, 11), (11, 11)]
    convolutions = (8 * 8 * 4 * 32 + 32) + (4 * 4 * 32 * 64 + 64) + (3 * 3 * 64 * 64 + 64)
    assert model.count_params() == convolutions + (11 * 11 * 64 * 512 + 512) + (512 * 4 + 4)
    assert build_nature_cnn_q_network((4, 84, 84), 4).count_params() == convolutions + (3136 * 512 + 512) + (512 * 4 + 4)
