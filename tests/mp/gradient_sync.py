"""Run under horovodrun by tests/agent/test_data_parallel_update.py: trains DQNLearner replicas on per-rank data and saves
each rank's final weights to <out>/rank<R>.npz, so the test can compare the replicas.

--mode=learner   the project's update step (DistributedOptimizer.minimize with the tape), Adam.
--mode=trap      the same optimizer, but gradients taken from the tape and passed to apply_gradients
                 directly: the path that silently skips the allreduce (the negative control).
--mode=sgd_one   one plain-SGD update of the project's step on this rank's share of a fixed data set of
                 2 * batch transitions (rank r of N takes rows r*2B/N ... (r+1)*2B/N).
--fp16_allreduce the gradients cross the allreduce as float16 (with --mode=sgd_one).
--mixed_precision mixed_float16 with loss scaling: the learner averages through DistributedGradientTape.
"""
import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import tensorflow as tf

from hvd_dqn import collectives
from hvd_dqn.agent.data_parallel_update import huber
from hvd_dqn.agent.dqn.learner import DQNLearner, td_targets
from hvd_dqn.agent.configs import make_config
from hvd_dqn.agent.optimizers import distributed_optimizer, make_optimizer
from hvd_dqn.agent.networks import build_mlp_q_network
from hvd_dqn.memories.replay import Batch
from hvd_dqn.run import horovod_setup

OBSERVATION_SIZE, NUM_ACTIONS, HIDDEN = 4, 3, (32, 32)


def random_batch(rng: np.random.Generator, size: int) -> Batch:
    return Batch(
        observation_tm1=rng.normal(size=(size, OBSERVATION_SIZE)).astype(np.float32),
        action_tm1=rng.integers(0, NUM_ACTIONS, size=size).astype(np.int32),
        reward_t=rng.normal(size=size).astype(np.float32),
        discount_t=0.99 * (rng.random(size) > 0.2).astype(np.float32),
        observation_t=rng.normal(size=(size, OBSERVATION_SIZE)).astype(np.float32),
    )


def flat_weights(model: tf.keras.Model) -> np.ndarray:
    return np.concatenate([variable.numpy().ravel() for variable in model.variables])


def trap_update(learner: DQNLearner, batch: Batch) -> None:
    """What a custom loop might write: tape.gradient + apply_gradients. Horovod never allreduces here."""
    q_target_t = learner.target(batch.observation_t)
    targets = td_targets(batch.reward_t, batch.discount_t, q_target_t)
    with tf.GradientTape() as tape:
        q_taken = tf.gather(learner.online(batch.observation_tm1), batch.action_tm1, axis=-1, batch_dims=1)
        loss = tf.reduce_mean(huber(targets - q_taken, learner.huber_delta))
    variables = learner.online.trainable_variables
    learner.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("learner", "trap", "sgd_one"), required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--fp16_allreduce", action="store_true")
    parser.add_argument("--mixed_precision", action="store_true")
    args = parser.parse_args()

    world = horovod_setup.init_horovod(intra_op_threads=1)

    if args.mixed_precision:
        tf.keras.mixed_precision.set_global_policy("mixed_float16")
    # Different initial weights per rank on purpose: the broadcast from rank 0 must make them equal.
    tf.keras.utils.set_random_seed(100 + world.rank)
    online = build_mlp_q_network((OBSERVATION_SIZE,), NUM_ACTIONS, HIDDEN, "online")
    target = build_mlp_q_network((OBSERVATION_SIZE,), NUM_ACTIONS, HIDDEN, "target")
    if args.mode == "sgd_one":
        optimizer = distributed_optimizer(tf.keras.optimizers.SGD(learning_rate=0.1), args.fp16_allreduce)
    else:
        optimizer = make_optimizer(make_config(scale_lr_by_workers=False, mixed_precision=args.mixed_precision),
                                   world.size)
    learner = DQNLearner(online, target, optimizer, double_dqn=True)
    assert learner.loss_scaling == args.mixed_precision
    collectives.broadcast_from_chief(learner.synchronized_variables)
    initial = flat_weights(online)

    if args.mode == "sgd_one":
        # The same 2B transitions on every rank (fixed seed); each rank trains on its own slice.
        data = random_batch(np.random.default_rng(7), 2 * args.batch)
        share = 2 * args.batch // world.size
        rows = slice(world.rank * share, (world.rank + 1) * share)
        learner.update(Batch(data.observation_tm1[rows], data.action_tm1[rows], data.reward_t[rows],
                             data.discount_t[rows], data.observation_t[rows]))
        data_seen = data.reward_t[rows]
    else:
        rng = np.random.default_rng(1000 + world.rank)  # each rank sees different data
        data_seen = []
        for _ in range(args.updates):
            batch = random_batch(rng, args.batch)
            data_seen.append(batch.reward_t)
            if args.mode == "learner":
                learner.update(batch)
            else:
                trap_update(learner, batch)
        data_seen = np.concatenate(data_seen)
    os.makedirs(args.out, exist_ok=True)
    np.savez(os.path.join(args.out, f"rank{world.rank}.npz"), initial=initial, final=flat_weights(online),
             data_seen=data_seen, size=world.size)


if __name__ == "__main__":
    main()
