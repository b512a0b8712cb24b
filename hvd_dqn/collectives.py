"""The collectives of a data-parallel job outside the gradient step: the weights broadcast from rank 0, a
barrier, sums and gathers of small vectors and objects, and the digest that shows replicas are equal.

Every rank must call each of them in the same order, or the job hangs ("tensors submitted by a subset of
ranks"). Below both the agents and the training loop, which call them; Horovod is imported inside each
function, so importing this module costs nothing until a collective runs.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def broadcast_from_chief(variables: Sequence) -> None:
    """Horovod: overwrite `variables` on every rank with rank 0's values (in place)."""
    import horovod.tensorflow as hvd

    hvd.broadcast_variables(list(variables), root_rank=0)


def barrier(name: str) -> None:
    """Returns on each rank once every rank has called it (a one-number allreduce)."""
    sum_over_ranks(np.zeros(1), name)


def sum_over_ranks(values: np.ndarray, name: str) -> np.ndarray:
    """Element-wise sum of a float64 vector over all ranks (every rank must call this)."""
    import horovod.tensorflow as hvd

    return hvd.allreduce(np.asarray(values, dtype=np.float64), op=hvd.Sum, name=name).numpy()


def gather_from_ranks(values: np.ndarray, name: str) -> np.ndarray:
    """Concatenates each rank's 1-D float64 vector (lengths may differ) in rank order."""
    import horovod.tensorflow as hvd

    if hvd.size() == 1:  # nothing to gather; Horovod's cycle would cost about a millisecond a call
        return np.asarray(values, dtype=np.float64).reshape(-1)
    return hvd.allgather(np.asarray(values, dtype=np.float64).reshape(-1), name=name).numpy()


def gather_objects(value, name: str) -> list:
    """Every rank's picklable `value`, in rank order, on every rank."""
    import horovod.tensorflow as hvd

    return hvd.allgather_object(value, name=name)


def weights_digest(variables: Sequence) -> str:
    """A short hash of the variables' exact bytes: equal digests on all ranks mean bitwise-equal replicas."""
    import hashlib

    digest = hashlib.sha256()
    for variable in variables:
        digest.update(np.ascontiguousarray(variable.numpy()).tobytes())
    return digest.hexdigest()[:16]


def broadcast_object(value, name: str):
    """Rank 0's picklable `value`, returned on every rank."""
    import horovod.tensorflow as hvd

    return hvd.broadcast_object(value, root_rank=0, name=name)
