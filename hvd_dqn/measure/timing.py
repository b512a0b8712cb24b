"""Rates taken side by side: each figure in alternating rounds with its comparison (A, B, A, B, ...), the
median round reported, so both see the same machine load (these machines are shared and noisy)."""
from __future__ import annotations

import time

import numpy as np


def rate(step, seconds: float) -> float:
    """Calls `step()` (which returns how many units it did) for about `seconds`; returns units per second."""
    done, start = 0, time.perf_counter()
    while True:
        done += step()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return done / elapsed



def side_by_side(steps: dict, seconds: float, rounds: int, before_round: dict = None) -> dict:
    """Median rate of each named step over `rounds` alternating rounds; `before_round[name]()`, if given, runs
    before each of that step's rounds, outside the timing."""
    rates = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            if before_round and name in before_round:
                before_round[name]()
            rates[name].append(rate(step, seconds))
    return {name: float(np.median(values)) for name, values in rates.items()}


def rename(values: dict, **names) -> dict:
    return {names[key]: value for key, value in values.items()}
