"""A sum tree for proportional prioritised replay (Schaul et al. 2016), vectorised over batches.

A complete binary tree stored in one array: leaves hold the priorities, every inner node the sum of its
two children, the root the total. Setting B leaves and finding B prefix sums each walk the tree's depth
once with NumPy operations over the whole batch (about 20 levels for a million leaves), so there is no
per-item Python on the hot path.
"""
from __future__ import annotations

import numpy as np


class SumTree:
    def __init__(self, capacity: int):
        if capacity <= 0:
            raise ValueError(f"sum tree capacity must be positive, got {capacity}")
        self.capacity = capacity
        self._leaves = self.leaves_for(capacity)
        self._depth = self._leaves.bit_length() - 1  # levels below the root
        self._nodes = np.zeros(2 * self._leaves, dtype=np.float64)  # node 1 is the root; node 0 is unused

    @staticmethod
    def leaves_for(capacity: int) -> int:
        """The leaves a tree for `capacity` priorities has: a power of two >= capacity."""
        return 1 << int(capacity - 1).bit_length()

    @staticmethod
    def bytes_for(capacity: int) -> int:
        """The bytes a tree for `capacity` priorities holds, without building it (the memory pre-flight)."""
        return 2 * SumTree.leaves_for(capacity) * np.dtype(np.float64).itemsize

    @property
    def total(self) -> float:
        return float(self._nodes[1])

    def get(self, indices: np.ndarray) -> np.ndarray:
        return self._nodes[self._leaves + np.asarray(indices, dtype=np.int64)]

    def set(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Sets leaf `indices[j]` to `priorities[j]` (the last wins for repeated indices) and re-sums their
        ancestors from their children, so rounding errors never accumulate."""
        indices = np.asarray(indices, dtype=np.int64)
        priorities = np.asarray(priorities, dtype=np.float64)
        if len(indices) and (indices.min() < 0 or indices.max() >= self.capacity):
            raise IndexError(f"sum tree index out of range [0, {self.capacity})")
        if len(priorities) and (not np.all(np.isfinite(priorities)) or priorities.min() < 0):
            raise ValueError("priorities must be finite and non-negative")
        nodes = self._leaves + indices
        self._nodes[nodes] = priorities
        for _ in range(self._depth):  # one level up at a time, to the root
            nodes = np.unique(nodes // 2)
            self._nodes[nodes] = self._nodes[2 * nodes] + self._nodes[2 * nodes + 1]

    def find(self, values: np.ndarray) -> np.ndarray:
        """For each value in [0, total), the leaf whose prefix-sum interval contains it: leaf i is found for
        values in [sum(p[:i]), sum(p[:i+1])), so with probability p_i / total for uniform values."""
        remaining = np.asarray(values, dtype=np.float64).copy()
        nodes = np.ones(len(remaining), dtype=np.int64)
        for _ in range(self._depth):  # one level down at a time, to the leaves
            left = self._nodes[2 * nodes]
            go_right = remaining >= left
            remaining -= np.where(go_right, left, 0.0)
            nodes = 2 * nodes + go_right
        leaves = nodes - self._leaves
        # Rounding can land on a zero-priority leaf beyond the last positive one; step back onto it.
        return np.minimum(leaves, self.capacity - 1)

    def sample(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """`count` leaves drawn in proportion to their priorities, one from each of `count` equal strata of
        the total (Schaul et al. 2016, Appendix B.2.1), which lowers the variance of a minibatch."""
        return self.find(self.stratified_values(count, rng.random(count)))

    def stratified_values(self, count: int, uniforms: np.ndarray) -> np.ndarray:
        return (np.arange(count) + uniforms) * (self.total / count)
