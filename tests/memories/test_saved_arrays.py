"""Restoring a saved memory holds no second copy of it, maps no page its saved zeros would leave unwritten, and a
damaged shard is refused by name."""
import tracemalloc
import zipfile

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



def _resident_bytes(array: np.ndarray) -> int:
    """The resident memory of the mapping that holds `array` (Linux's /proc/self/smaps)."""
    address, inside = array.ctypes.data, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            first = line.split()[0]
            if "-" in first and ":" not in first:  # a mapping's header: start-end perms ...
                start, end = (int(bound, 16) for bound in first.split("-"))
                inside = start <= address < end
            elif inside and first == "Rss:":
                return int(line.split()[1]) * 1024
    raise AssertionError("the array's mapping is not in /proc/self/smaps")


def test_a_restore_maps_only_what_the_saved_memory_used_and_overwrites_stale_values(tmp_path, monkeypatch):
    monkeypatch.setattr(saved_arrays, "CHUNK_BYTES", 1 << 20)
    size, used = 128 << 20, 8 << 20  # a memory of 128 MiB saved with its first 8 MiB written
    saved = np.zeros(size, dtype=np.uint8)
    saved[:used] = np.random.default_rng(0).integers(1, 255, used, dtype=np.uint8)
    saved[size // 2] = 7  # one byte written past the rest
    np.savez_compressed(tmp_path / "memory.npz", frames=saved)
    with zipfile.ZipFile(tmp_path / "memory.npz") as archive:
        fresh = np.zeros(size, dtype=np.uint8)  # untouched: no page of it mapped yet
        saved_arrays.copy_into(fresh, saved_arrays.StoredArray(archive, "frames.npy"))
        resident = _resident_bytes(fresh)
        stale = np.ones(size, dtype=np.uint8)  # a memory that held other values: every byte must be replaced
        saved_arrays.copy_into(stale, saved_arrays.StoredArray(archive, "frames.npy"))
    np.testing.assert_array_equal(fresh, saved)
    np.testing.assert_array_equal(stale, saved)
    # Writing every chunk maps all 128 MiB; skipping the zeros maps the 8 MiB used and the chunk with the 7.
    assert resident < 3 * used, f"restoring {used:,} used bytes of {size:,} mapped {resident:,}"
