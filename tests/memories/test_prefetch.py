"""Minibatches drawn in the background are the ones drawn in line, and are drawn during the update."""
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from hvd_dqn.memories.replay import ReplayMemory
from hvd_dqn.memories.prefetch import minibatches


def _memory():
    memory, rng = ReplayMemory(200, 2, (3,)), np.random.default_rng(0)
    for _ in range(100):
        ended = rng.random(2) < 0.1
        memory.add(rng.normal(size=(2, 3)), rng.integers(0, 3, 2), rng.normal(size=2), (~ended).astype(np.float32),
                   rng.normal(size=(2, 3)), ended)
    return memory


def test_background_draws_are_the_in_line_draws_in_order():
    memory = _memory()
    rng_a = np.random.default_rng(3)
    in_line = list(minibatches(lambda: memory.sample(8, rng_a), 5, None))
    rng_b = np.random.default_rng(3)
    with ThreadPoolExecutor(1) as pool:
        background = list(minibatches(lambda: memory.sample(8, rng_b), 5, pool))
    assert len(background) == 5
    for one, other in zip(in_line, background):
        np.testing.assert_array_equal(one.observation_tm1, other.observation_tm1)
        np.testing.assert_array_equal(one.action_tm1, other.action_tm1)


def test_the_next_draw_runs_while_the_caller_works_on_the_current_batch():
    started = [threading.Event() for _ in range(4)]
    drawers = []

    def draw():
        index = len(drawers)
        drawers.append(threading.current_thread().name)
        started[index].set()
        return index

    with ThreadPoolExecutor(1, thread_name_prefix="minibatches") as pool:
        for batch in minibatches(draw, 3, pool):
            if batch < 2:  # during "update" k, draw k + 1 is under way without the caller asking for it
                assert started[batch + 1].wait(timeout=5), f"draw {batch + 1} did not start during update {batch}"
    assert len(drawers) == 3 and all(name.startswith("minibatches") for name in drawers)


def test_no_update_due_means_no_draw_at_all():
    """With fewer env steps per iteration than --train_frequency most iterations make no update: drawing
    anyway would read the memory while it is written and advance the sampling RNG (unrepeatable runs)."""
    calls = []
    with ThreadPoolExecutor(1) as pool:
        assert list(minibatches(lambda: calls.append(1), 0, pool)) == []
        assert list(minibatches(lambda: calls.append(1), 0, None)) == []
    assert calls == []
