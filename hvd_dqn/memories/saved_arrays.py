"""Writing a rank's memory into a checkpoint: one compressed .npz of the arrays its `state()` returns, read
back by its `load_state()`, and a digest of them that says whether two memories are identical. Shared by the
replay memories and PQN's rollout.

A replay memory of 1M Atari frames is about 7 GiB, most of a rank's memory. Restoring it must not hold a
second copy: `load` reads each array's shape and type from its header first, and `copy_into` decompresses it
into the memory's own array a chunk at a time, so two ranks on a 24 GiB machine can both resume; the chunks of
zeros a memory not yet full saved are not written, so its unused capacity stays unmapped."""
from __future__ import annotations

import hashlib
import os
import zipfile
from typing import Dict, Optional, Union

import numpy as np

EXTRA_PREFIX = "extra_"  # arrays saved beside a memory that are not part of it (the rank's emulators' state)
CHUNK_BYTES = 64 << 20  # what a restore or a digest holds beside the memory at any moment


class StoredArray:
    """One array of a saved memory, not yet read: its `shape` and `dtype` come from the .npy header, its data
    only when it is copied (`copy_into`) or asked for whole (`np.asarray`)."""

    def __init__(self, archive: zipfile.ZipFile, member: str):
        self._archive, self._member = archive, member
        with archive.open(member) as stream:
            self.shape, self._fortran_order, self.dtype = _read_header(stream)

    def __array__(self, dtype=None, copy=None):
        with self._archive.open(self._member) as stream:
            array = np.lib.format.read_array(stream)
        return array if dtype is None else array.astype(dtype)

    def copy_into(self, destination: np.ndarray) -> None:
        """Decompresses the array into `destination` (the same shape and type, C-contiguous) a chunk at a time.
        A chunk of zeros is not written where `destination` holds zeros already: the pages a memory saved before
        it filled never wrote stay unmapped in a fresh one, so a resume takes what the run had used, not the
        memory's whole capacity at once."""
        target = destination.reshape(-1).view(np.uint8)
        buffer = np.empty(min(CHUNK_BYTES, len(target)), dtype=np.uint8)
        with self._archive.open(self._member) as stream:
            _read_header(stream)
            for start in range(0, len(target), CHUNK_BYTES):
                chunk, part = buffer[:min(CHUNK_BYTES, len(target) - start)], target[start:start + CHUNK_BYTES]
                view, done = memoryview(chunk), 0
                while done < len(chunk):
                    read = stream.readinto(view[done:])
                    if not read:
                        raise ValueError(f"{self._member} ends after {start + done:,} of its {len(target):,} bytes")
                    done += read
                if chunk.any() or part.any():  # reading a page never written maps no memory; writing would
                    part[...] = chunk

    def fits(self, destination: np.ndarray) -> bool:
        return (not self._fortran_order and destination.flags.c_contiguous and self.shape == destination.shape
                and self.dtype == destination.dtype and not self.dtype.hasobject)


def _read_header(stream):
    version = np.lib.format.read_magic(stream)
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    if version not in readers:
        raise ValueError(f"is an .npy of format {version[0]}.{version[1]}, which this version cannot read")
    return readers[version](stream)


def copy_into(destination: np.ndarray, source: Union[np.ndarray, StoredArray]) -> None:
    """destination[...] = source, without a whole second copy when `source` is still in its file."""
    if isinstance(source, StoredArray) and source.fits(destination):
        source.copy_into(destination)
    else:
        destination[...] = np.asarray(source)


class SavedArrays:
    """Mixin for a memory with `state() -> {name: array}` and `load_state(state)`; `load_state` copies each
    array with `copy_into`, so its values may be arrays or `StoredArray`s."""

    def save(self, path: str, extra: Optional[Dict[str, np.ndarray]] = None) -> None:
        """Writes state() as one compressed .npz file (written beside `path`, then renamed), with `extra`
        arrays of the rank's that belong with its memory (its emulators' state) beside it."""
        temporary = f"{path}.partial.npz"
        extra = {EXTRA_PREFIX + name: array for name, array in (extra or {}).items()}
        np.savez_compressed(temporary, **self.state(), **extra)
        os.replace(temporary, path)

    def load(self, path: str) -> Dict[str, np.ndarray]:
        """Restores a `save`d memory; returns the `extra` arrays saved with it."""
        try:
            archive = zipfile.ZipFile(path)
        except zipfile.BadZipFile as error:
            raise ValueError(f"is not a saved memory ({error})") from None
        with archive:
            stored = {member[:-len(".npy")]: StoredArray(archive, member) for member in archive.namelist()
                      if member.endswith(".npy")}
            self.load_state({name: array for name, array in stored.items() if not name.startswith(EXTRA_PREFIX)})
            return {name[len(EXTRA_PREFIX):]: np.asarray(array) for name, array in stored.items()
                    if name.startswith(EXTRA_PREFIX)}

    def check_state(self, state: Dict[str, np.ndarray], other_fields: str, other_shapes: str) -> None:
        """Raises ValueError if `state` holds other arrays than `state()` (`other_fields` says why that may be)
        or one of another shape or type (`other_shapes`), naming the first."""
        expected = self.state()
        missing = sorted(set(expected) - set(state)) or sorted(set(state) - set(expected))
        if missing:
            raise ValueError(f"holds different fields ({', '.join(missing)}): {other_fields}")
        for name, array in expected.items():
            if state[name].shape != array.shape or state[name].dtype != array.dtype:
                raise ValueError(f"{name.strip('_')} has shape {state[name].shape} {state[name].dtype}, this run "
                                 f"{array.shape} {array.dtype} ({other_shapes})")

    def digest(self) -> str:
        """A short hash of the whole state: equal digests mean identical memories. Hashed a chunk at a time
        from the arrays themselves, never from a copy of them."""
        digest = hashlib.sha256()
        for name, array in sorted(self.state().items()):
            digest.update(name.encode())
            data = memoryview(np.ascontiguousarray(array).reshape(-1).view(np.uint8))
            for start in range(0, len(data), CHUNK_BYTES):
                digest.update(data[start:start + CHUNK_BYTES])
        return digest.hexdigest()[:16]
