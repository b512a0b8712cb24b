"""Restoring a saved memory holds no second copy of it, maps no page its saved zeros would leave unwritten, and a
damaged shard is refused by name."""
import subprocess
import sys
import tracemalloc
import zipfile

import numpy as np
import pytest

from hvd_dqn.memories import saved_arrays
from hvd_dqn.memories.frames import FrameReplayMemory
from hvd_dqn.memories.replay import PrioritySettings

from conftest import REPO


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


# Restores a saved array into a fresh one in a process of its own, so the growth of its anonymous resident memory
# is the restore's: what it mapped of the destination, its chunk buffer and the decompressor's.
_RESTORE_IN_A_FRESH_PROCESS = """
import sys, zipfile
import numpy as np
from hvd_dqn.memories import saved_arrays

def anonymous_resident():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("RssAnon:"))

saved_arrays.CHUNK_BYTES = 1 << 20
with zipfile.ZipFile(sys.argv[1]) as archive:
    stored = saved_arrays.StoredArray(archive, "frames.npy")
    fresh = np.zeros(stored.shape, dtype=stored.dtype)  # no page of it mapped yet
    before = anonymous_resident()
    saved_arrays.copy_into(fresh, stored)
    grown = anonymous_resident() - before
np.save(sys.argv[2], fresh)
print(grown)
"""


def test_a_restore_maps_only_what_the_saved_memory_used_and_overwrites_stale_values(tmp_path, monkeypatch):
    monkeypatch.setattr(saved_arrays, "CHUNK_BYTES", 1 << 20)
    size, used = 128 << 20, 8 << 20  # a memory of 128 MiB saved with its first 8 MiB written
    saved = np.zeros(size, dtype=np.uint8)
    saved[:used] = np.random.default_rng(0).integers(1, 255, used, dtype=np.uint8)
    saved[size // 2] = 7  # one byte written past the rest
    np.savez_compressed(tmp_path / "memory.npz", frames=saved)
    result = subprocess.run([sys.executable, "-c", _RESTORE_IN_A_FRESH_PROCESS, str(tmp_path / "memory.npz"),
                             str(tmp_path / "restored.npy")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    grown = int(result.stdout.split()[-1])
    np.testing.assert_array_equal(np.load(tmp_path / "restored.npy"), saved)
    # Writing every chunk maps all 128 MiB; skipping the zeros maps the 8 MiB used and the chunk with the 7.
    assert grown < 3 * used, f"restoring {used:,} used bytes of {size:,} grew the resident memory by {grown:,}"
    with zipfile.ZipFile(tmp_path / "memory.npz") as archive:
        stale = np.ones(size, dtype=np.uint8)  # a memory that held other values: every byte must be replaced
        saved_arrays.copy_into(stale, saved_arrays.StoredArray(archive, "frames.npy"))
    np.testing.assert_array_equal(stale, saved)
