"""What one update of PQN's CartPole network costs on one core, at the batch sizes 1 and 2 workers use, and
what is left without Horovod, gradient clipping or RAdam, and with XLA: the evidence for why a worker's share
of a small network's update does not shrink with its batch (results/time_to_score/README.md).

    taskset -c 1 .venv/bin/python studies/update_cost.py > results/time_to_score/pqn_update_cost.txt
"""
import time

import numpy as np
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

import horovod.tensorflow.keras as hvd  # noqa: E402

from hvd_dqn.agent.optimizers import RectifiedAdam  # noqa: E402
from hvd_dqn.agent.networks import build_mlp_q_network  # noqa: E402
from hvd_dqn.agent.pqn.learner import PQNLearner  # noqa: E402


def per_call_ms(function, calls: int = 500) -> float:
    function()  # traced and warm
    start = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - start) / calls * 1e3


def main() -> None:
    hvd.init()
    network = build_mlp_q_network((4,), 2, (120, 84), layer_norm=True)  # configs/cartpole_pqn.flags
    learner = PQNLearner(network, hvd.DistributedOptimizer(RectifiedAdam(2.5e-4, clipnorm=10.0)))
    rng = np.random.default_rng(0)

    def batch(size):
        return (rng.random((size, 4), dtype=np.float32), rng.integers(0, 2, size),
                rng.random(size, dtype=np.float32))

    for size in (128, 64, 32):
        observation, action, target = batch(size)
        print(f"hvd_dqn's PQN update (DistributedOptimizer, RAdam, clipping), batch {size}: "
              f"{per_call_ms(lambda: learner.update(observation, action, target)):.3f} ms")

    observation, action, target = (tf.constant(part) for part in batch(128))
    adam = tf.keras.optimizers.Adam(2.5e-4)
    adam.build(network.trainable_variables)

    def loss_of(o, a, t):
        q = tf.gather(network(o, training=True), a, axis=-1, batch_dims=1)
        return tf.reduce_mean(tf.square(t - q))

    @tf.function(autograph=False)
    def plain_update(o, a, t):
        with tf.GradientTape() as tape:
            loss = loss_of(o, a, t)
        adam.apply_gradients(zip(tape.gradient(loss, network.trainable_variables), network.trainable_variables))
        return loss

    @tf.function(jit_compile=True)
    def xla_gradient(o, a, t):
        with tf.GradientTape() as tape:
            loss = loss_of(o, a, t)
        return loss, tape.gradient(loss, network.trainable_variables)

    print(f"plain Adam update, no Horovod or clipping, batch 128: "
          f"{per_call_ms(lambda: plain_update(observation, action, target).numpy()):.3f} ms")
    print(f"the gradient alone, compiled by XLA, batch 128: "
          f"{per_call_ms(lambda: xla_gradient(observation, action, target)[0].numpy()):.3f} ms")


if __name__ == "__main__":
    main()
