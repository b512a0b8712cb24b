"""Minibatches drawn in the background: the next one is sampled while the learner trains on the current one.

With a GPU learner an update takes a few milliseconds and drawing a frame minibatch (gathering 32 x 5
frames from gigabytes of memory) costs a sizeable share of that; drawn on a worker thread, it overlaps the
update instead (NumPy's gathers and TensorFlow's ops both release the GIL). The draws happen one after
another, in order, from the same random stream, so the minibatches are exactly those of drawing in line.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator, Optional


def minibatches(draw: Callable[[], object], count: int, pool: Optional[ThreadPoolExecutor]) -> Iterator[object]:
    """Yields `count` results of `draw()`. With a pool, draw k + 1 runs there while the caller uses batch k;
    without one (prioritised replay: each draw must see the priorities the previous update set), in line."""
    if pool is None or count <= 1:  # nothing to overlap; and no draw at all when count is 0
        for _ in range(count):
            yield draw()
        return
    upcoming = pool.submit(draw)
    for index in range(count):
        batch = upcoming.result()
        if index + 1 < count:
            upcoming = pool.submit(draw)
        yield batch
