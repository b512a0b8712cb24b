"""The gradient allreduce of one update across a job's ranks, and what the ring algorithm predicts for it from
this machine's loopback bandwidth."""
from __future__ import annotations

import dataclasses
import time

import numpy as np


def allreduce_rates(config, seconds: float, rounds: int, busy_s: float = 0.0) -> dict:
    """Collective: the cost of one update's gradient allreduce across this job's ranks, and what the ring
    formula predicts for it from this machine's loopback bandwidth (measured on rank 0).

    busy_s > 0: each rank first keeps its core busy that long before each allreduce, as training does with its
    acting and update, and the busy time is taken out of the figure. Back to back (busy_s = 0) every call
    waits for the next of Horovod's cycles; between a rank's own work it waits less, while Horovod's
    background thread competes with that work for the core."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    from hvd_dqn.agent.networks import q_network_for
    from hvd_dqn.envs import make_env_for, spec_of

    env = make_env_for(dataclasses.replace(config, env_threads=1), 1)
    spec = spec_of(env)
    env.close()
    network = q_network_for(config, spec, "online")
    gradients = [tf.random.normal(variable.shape, seed=hvd.rank()) for variable in network.trainable_variables]
    gradient_bytes = sum(int(np.prod(gradient.shape)) * 4 for gradient in gradients)

    @tf.function
    def allreduce():
        # As DistributedOptimizer does: one averaging allreduce per gradient, which Horovod fuses.
        return [hvd.allreduce(gradient, op=hvd.Average, name=f"gradient_{index}")
                for index, gradient in enumerate(gradients)]

    def step():
        if busy_s:
            until = time.perf_counter() + busy_s
            while time.perf_counter() < until:  # the rank's own work, on its own core
                pass
        outputs = allreduce()
        outputs[-1].numpy()  # wait for it
        return 1

    step()  # trace and negotiate outside the timing
    # Timed by call count, not by the clock: every rank must issue the same number of collectives, or the
    # last ones would wait forever. Rank 0's probe decides the count for everyone.
    probe_start = time.perf_counter()
    for _ in range(5):
        step()
    calls = max(5, int(seconds / ((time.perf_counter() - probe_start) / 5)))
    calls = int(hvd.broadcast_object(calls, root_rank=0, name="benchmark_calls"))
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
