"""The synchronous data-parallel update both agents make, and the TD losses they share.

Every rank computes the loss on its own minibatch; `hvd.DistributedOptimizer` averages the gradients over
ranks with ring-allreduce inside `minimize(loss, var_list, tape=tape)`, so every rank applies the same
update and the replicas stay identical. The gradient must be computed through that call: computing it
with the tape and calling `apply_gradients` directly skips the allreduce in Horovod 0.28 with Keras 2.11+,
and each rank would silently train alone (tests/agent/test_data_parallel_update.py proves the replicas agree only with it).
"""
from __future__ import annotations

from typing import Optional

import tensorflow as tf

# All gradients of an update cross the allreduce as one group, so every update fuses the same tensors into
# the same buffer. Left to Horovod's tensor fusion, which tensors share a buffer depends on when each is
# ready, so an element's sum over 3 or more ranks is added in an order that changes from run to run (two
# 4-rank CartPole runs with one seed parted ways soon after learning started); with one group they repeat bit
# for bit (tests/agent/test_data_parallel_update.py). With 2 ranks the order cannot matter.
ALLREDUCE_GROUPS = 1


def allreduce_groups(elastic: bool) -> Optional[int]:
    """The allreduce grouping of a job's updates: one group, except under --elastic, where a grouped allreduce
    traced before a change of world fails once Horovod re-initialises (tests/run/test_elastic.py's killed worker),
    and a run whose world changes cannot repeat bit for bit anyway."""
    return None if elastic else ALLREDUCE_GROUPS


def td_loss(td_error, loss: str, huber_delta: float = 1.0):
    """The per-transition loss of a TD error: "huber" (Mnih et al. 2015 clip the error's gradient at delta)
    or "mse", the squared error without a factor 1/2, as Dopamine's JAX DQN (dopamine/jax/losses.py)."""
    if loss == "mse":
        return tf.square(td_error)
    if loss == "huber":
        return huber(td_error, huber_delta)
    raise ValueError(f"unknown TD loss {loss!r}; expected huber or mse")


def huber(x, delta: float):
    """Huber loss, elementwise: quadratic within |x| <= delta, linear beyond (Mnih et al. 2015 clip the TD error)."""
    abs_x = tf.abs(x)
    quadratic = tf.minimum(abs_x, delta)
    return 0.5 * quadratic**2 + delta * (abs_x - quadratic)


class DistributedUpdate:
    """The online network, its optimizer and the update counter; `_minimize` takes one step, its gradient
    averaged over the ranks. DQN's and PQN's learners add their targets and losses.

    `optimizer` comes from `hvd_dqn.agent.optimizers.make_optimizer`: a DistributedOptimizer, or with
    --mixed_precision a LossScaleOptimizer, whose scaled gradients Horovod's DistributedGradientTape averages.
    """

    def __init__(self, online: tf.keras.Model, optimizer, loss: str, huber_delta: float,
                 fp16_allreduce: bool = False, groups: Optional[int] = ALLREDUCE_GROUPS):
        self.online = online
        self.optimizer = optimizer
        # --mixed_precision: the loss is scaled (float16 gradients would underflow) and the gradients are
        # averaged by Horovod's DistributedGradientTape instead of a DistributedOptimizer (see make_optimizer).
        self.loss_scaling = isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer)
        self.fp16_allreduce = fp16_allreduce
        self.allreduce_groups = groups
        td_loss(tf.zeros(1), loss)  # an unknown loss fails here, not inside the first traced update
        self.loss = loss
        self.huber_delta = float(huber_delta)
        self.num_updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="num_updates")
        # Create the optimizer's slot variables now, so they exist to be broadcast and checkpointed before
        # the first update.
        self.optimizer.build(self.online.trainable_variables)

    def _td_loss(self, td_error):
        return td_loss(td_error, self.loss, self.huber_delta)

    def _minimize(self, loss, tape, scaled_loss) -> None:
        """Inside an update's graph: one step of the optimizer on `loss`, its gradient averaged over the ranks,
        and the update counted. `scaled_loss`: the loss scaled by a LossScaleOptimizer, recorded on `tape`.

        Horovod: `minimize(..., tape=)` is the path on which DistributedOptimizer allreduces the gradients;
        computing them with the tape and calling `apply_gradients` would train each rank alone. With
        --mixed_precision the optimizer is a LossScaleOptimizer, which Horovod cannot wrap: the gradients of
        the scaled loss are averaged by Horovod's DistributedGradientTape instead."""
        variables = self.online.trainable_variables
        if not self.loss_scaling:
            self.optimizer.minimize(loss, variables, tape=tape)
        else:
            import horovod.tensorflow as hvd

            compression = hvd.Compression.fp16 if self.fp16_allreduce else hvd.Compression.none
            scaled_gradients = hvd.DistributedGradientTape(tape, compression=compression, groups=self.allreduce_groups
                                                           ).gradient(scaled_loss, variables)
            # Every rank holds the same averaged gradients, so all skip a non-finite step and change the loss
            # scale alike.
            self.optimizer.apply_gradients(zip(self.optimizer.get_unscaled_gradients(scaled_gradients), variables))
        self.num_updates.assign_add(1)

    def _scaled(self, loss):
        """The loss as the optimizer's loss scaling wants it on the tape (None without --mixed_precision)."""
        return self.optimizer.get_scaled_loss(loss) if self.loss_scaling else None
