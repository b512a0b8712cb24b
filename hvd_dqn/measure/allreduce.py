"""The gradient allreduce of one update across a job's ranks: alone, with what the ring algorithm predicts for it
from this machine's loopback bandwidth, and inside the trainer's own update, where it is the cost model's
t_sync."""
from __future__ import annotations

import time

import numpy as np

# Why the exchange cannot be timed under --mixed_precision, in the words both the benchmark and the cost model use.
MIXED_PRECISION_UNMEASURABLE = ("--mixed_precision: its loss-scaled update always averages the gradients across "
                                "ranks, so the update without its exchange (t_sync) cannot be timed beside it")


def allreduce_rates(config, seconds: float, rounds: int, busy_s: float = 0.0) -> dict:
    """Collective: the cost of one update's gradient allreduce across this job's ranks, and what the ring
    formula predicts for it from this machine's loopback bandwidth (measured on rank 0).

    busy_s > 0: each rank first keeps its core busy that long before each allreduce, as training does with its
    acting and update, and the busy time is taken out of the figure. Back to back (busy_s = 0) every call
    waits for the next of Horovod's cycles; between a rank's own work it waits less, while Horovod's
    background thread competes with that work for the core."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    from hvd_dqn.agent.factory import online_network
    from hvd_dqn.envs import probe_spec

    spec = probe_spec(config)
    network = online_network(config, spec)
    gradients = [tf.random.normal(variable.shape, seed=hvd.rank()) for variable in network.trainable_variables]
    gradient_bytes = sum(int(np.prod(gradient.shape)) * 4 for gradient in gradients)

    @tf.function
    def allreduce():
        # As DistributedOptimizer does: one averaging allreduce per gradient, which Horovod fuses.
        return [hvd.allreduce(gradient, op=hvd.Average, name=f"gradient_{index}")
                for index, gradient in enumerate(gradients)]

    def step():
        _keep_busy(busy_s)  # the rank's own work, on its own core
        outputs = allreduce()
        outputs[-1].numpy()  # wait for it
        return 1

    step()  # trace and negotiate outside the timing
    calls = _calls_per_round(step, seconds)
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            step()
        rates.append(calls / (time.perf_counter() - start - calls * busy_s))
    updates_per_s = float(np.median(rates))
    bandwidth = _loopback_bytes_per_s() if hvd.rank() == 0 else 0.0
    size = hvd.size()
    return {"ranks": size, "gradient_bytes_per_update": gradient_bytes, "allreduce_busy_ms": 1000.0 * busy_s,
            "allreduce_ms_per_update": 1000.0 / updates_per_s, "loopback_bytes_per_s": bandwidth,
            "ring_allreduce_ms_predicted": 1000.0 * 2 * (size - 1) / size * gradient_bytes / bandwidth
            if bandwidth else None}


BLOCK_S = 0.15  # seconds of updates per timed block of exchange_in_update


def exchange_in_update(config, batch_size: int, seconds: float, rounds: int, acting_s: float) -> dict:
    """Collective: what the gradient exchange adds to the trainer's own update at this job's size, the cost
    model's t_sync. Each rank times the update a rank of the job makes (the config's network, loss and optimizer
    on a minibatch of `batch_size` from a memory of its own, with Horovod's DistributedOptimizer) against the same
    update without the allreduce, in alternating blocks, all ranks at once, `rounds` x `seconds` of both in all;
    before each update it keeps its core busy for `acting_s`, as its acting does in training. The difference
    holds all that the exchange costs the rank: TensorFlow's allreduce op and its copies, Horovod's background
    thread on the rank's core, the wait for the slower rank. A bare allreduce (`allreduce_rates`) sees only part
    of it (on MinAtar 0.27 of the 0.42 ms; results/cost_model/README.md)."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    from hvd_dqn.agent.factory import replay_learner, replay_memory
    from hvd_dqn.envs import probe_spec
    from hvd_dqn.measure.training_modes import fill_replay

    if config.mixed_precision:
        raise ValueError(MIXED_PRECISION_UNMEASURABLE)
    tf.keras.utils.set_random_seed(config.seed + hvd.rank())
    rng = np.random.default_rng(config.seed + hvd.rank())
    spec = probe_spec(config)
    replay = replay_memory(config, spec, 1, min(config.replay_capacity, 20_000))
    fill_replay(replay, spec, 1, rng)
    size = hvd.size()
    learners = {"exchanged": replay_learner(config, spec, size),
                "alone": replay_learner(config, spec, size, distributed=False)}
    for learner in learners.values():  # every rank starts from rank 0's weights, as in training
        hvd.broadcast_variables(learner.synchronized_variables, root_rank=0)

    def update(learner):
        _keep_busy(acting_s)
        batch = replay.sample(batch_size, rng, config.priority_beta_start)
        metrics = learner.update(batch)  # returns once the step (and its exchange) is done
        if batch.indices is not None:
            replay.update_priorities(batch.indices, metrics["td_errors"])
        return 1

    steps = {name: (lambda learner=learner: update(learner)) for name, learner in learners.items()}
    for step in steps.values():
        step()  # trace each update (and negotiate the exchange) outside the timing
    # This machine's speed drifts by tens of percent within minutes, more than the exchange costs: the two
    # updates are timed in short adjacent blocks (about BLOCK_S each), and the exchange is the median of the
    # blocks' paired differences, so a drift slower than a block cancels.
    calls = _calls_per_round(steps["exchanged"], BLOCK_S)
    pairs = max(3, int(round(rounds * seconds / (2 * BLOCK_S))))
    seconds_per_update = {name: [] for name in steps}
    for _ in range(pairs):
        for name, step in steps.items():
            hvd.broadcast_object(0, root_rank=0, name=f"exchange_block_{name}")  # every rank starts the block at once
            start = time.perf_counter()
            for _ in range(calls):
                step()
            seconds_per_update[name].append((time.perf_counter() - start) / calls - acting_s)
    exchanged, alone = (float(np.median(seconds_per_update[name])) for name in ("exchanged", "alone"))
    differences = np.subtract(seconds_per_update["exchanged"], seconds_per_update["alone"])
    # Proof that the two timed updates are what they claim: after the same number of steps on each rank's own
    # minibatches, the ranks' exchanged networks are still equal and their lone ones are not.
    agree = {name: len(set(hvd.allgather_object(_weights_digest(learner), name=f"exchange_digest_{name}"))) == 1
             for name, learner in learners.items()}
    return {"exchange_batch_size": batch_size, "exchange_acting_ms": 1000.0 * acting_s,
            "update_exchanged_ms": 1000.0 * exchanged, "update_alone_ms": 1000.0 * alone,
            "exchange_in_update_ms": 1000.0 * float(np.median(differences)), "exchange_block_pairs": pairs,
            "update_exchanged_blocks_ms": [1000.0 * value for value in seconds_per_update["exchanged"]],
            "update_alone_blocks_ms": [1000.0 * value for value in seconds_per_update["alone"]],
            "exchanged_ranks_agree": agree["exchanged"], "alone_ranks_agree": agree["alone"]}


def _weights_digest(learner) -> str:
    """The online network's weights, bit for bit, as a short hex digest."""
    import hashlib

    digest = hashlib.sha256()
    for variable in learner.online.variables:
        digest.update(variable.numpy().tobytes())
    return digest.hexdigest()


def _keep_busy(seconds: float) -> None:
    """Spins on this rank's core for `seconds`: the rank's own work between two exchanges."""
    if seconds:
        until = time.perf_counter() + seconds
        while time.perf_counter() < until:
            pass


def _calls_per_round(step, seconds: float) -> int:
    """Collective: how many calls of `step` fill a round of about `seconds` on rank 0. Rounds are timed by call
    count, not by the clock: every rank must issue the same number of collectives, or the last ones would wait
    forever; rank 0's probe decides the count for everyone."""
    import horovod.tensorflow as hvd

    probe_start = time.perf_counter()
    for _ in range(5):
        step()
    calls = max(5, int(seconds / ((time.perf_counter() - probe_start) / 5)))
    return int(hvd.broadcast_object(calls, root_rank=0, name="benchmark_calls"))


def _loopback_bytes_per_s(total_bytes: int = 512 * 2**20, chunk: int = 4 * 2**20) -> float:
    """Bytes per second of one TCP stream through 127.0.0.1 on this machine (a sender thread, a receiver)."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    receiver_done = threading.Event()

    def receive():
        connection, _ = listener.accept()
        with connection:
            received, buffer = 0, bytearray(chunk)
            while received < total_bytes:
                count = connection.recv_into(buffer)
                if not count:
                    break
                received += count
        receiver_done.set()

    thread = threading.Thread(target=receive, daemon=True)
    thread.start()
    payload = bytes(chunk)
    with socket.create_connection(listener.getsockname()) as sender:
        start = time.perf_counter()
        for _ in range(total_bytes // chunk):
            sender.sendall(payload)
        receiver_done.wait()
        elapsed = time.perf_counter() - start
    listener.close()
    return total_bytes / elapsed
