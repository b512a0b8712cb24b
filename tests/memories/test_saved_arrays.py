"""Restoring a saved memory holds no second copy of it, and a damaged shard is refused by name."""
import tracemalloc

import numpy as np
import pytest

from hvd_dqn.memories import saved_arrays
from hvd_dqn.memories.frames import FrameReplayMemory
from hvd_dqn.memories.replay import PrioritySettings


def _filled(capacity=4096, envs=2):
    """A frame memory of 4096 84x84 frames (29 MB), every frame random, written over more than once."""
    memory, rng = FrameReplayMemory(capacity, envs, priority=PrioritySettings()), np.random.default_rng(0)
    for step in range(capacity // envs + 100):
        frames = rng.integers(0, 255, size=(envs, 4, 84, 84), dtype=np.uint8)
        ended = rng.random(envs) < 0.01
        memory.add(frames, rng.integers(0, 6, envs), rng.normal(size=envs), (~ended).astype(np.float32), frames,
                   ended)
    return memory


def test_a_restore_and_a_digest_hold_a_chunk_not_a_copy(tmp_path, monkeypatch):
    monkeypatch.setattr(saved_arrays, "CHUNK_BYTES", 1 << 20)
    memory = _filled()
    frames_bytes = memory.state()["_frames"].nbytes
    memory.save(str(tmp_path / "shard.npz"), extra={"emulators": np.arange(10)})
    restored = FrameReplayMemory(4096, 2, priority=PrioritySettings())
    tracemalloc.start()
    try:
        extra = restored.load(str(tmp_path / "shard.npz"))
        digest = restored.digest()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert digest == memory.digest()
    np.testing.assert_array_equal(extra["emulators"], np.arange(10))
    # np.load would have held the whole decompressed frames array (29 MB) and tobytes() another.
    assert peak < frames_bytes / 4, f"restoring {frames_bytes:,} bytes of frames peaked at {peak:,} more"


def test_a_damaged_shard_is_refused_by_name(tmp_path):
    memory = _filled(capacity=512)
    path = tmp_path / "shard.npz"
    memory.save(str(path))
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])  # cut off: the zip's directory at its end is gone
    with pytest.raises(ValueError, match="not a saved memory"):
        FrameReplayMemory(512, 2, priority=PrioritySettings()).load(str(path))
    path.write_bytes(b"not a zip file at all")
    with pytest.raises(ValueError, match="not a saved memory"):
        FrameReplayMemory(512, 2, priority=PrioritySettings()).load(str(path))

