"""Writing a rank's memory into a checkpoint: one compressed .npz of the arrays its `state()` returns, read
back by its `load_state()`, and a digest of them that says whether two memories are identical. Shared by the
replay memories and PQN's rollout."""
from __future__ import annotations

import hashlib
import os
from typing import Dict, Optional

import numpy as np

EXTRA_PREFIX = "extra_"  # arrays saved beside a memory that are not part of it (the rank's emulators' state)


class SavedArrays:
    """Mixin for a memory with `state() -> {name: array}` and `load_state(state)`."""

    def save(self, path: str, extra: Optional[Dict[str, np.ndarray]] = None) -> None:
        """Writes state() as one compressed .npz file (written beside `path`, then renamed), with `extra`
        arrays of the rank's that belong with its memory (its emulators' state) beside it."""
        temporary = f"{path}.partial.npz"
        extra = {EXTRA_PREFIX + name: array for name, array in (extra or {}).items()}
        np.savez_compressed(temporary, **self.state(), **extra)
        os.replace(temporary, path)

    def load(self, path: str) -> Dict[str, np.ndarray]:
        """Restores a `save`d memory; returns the `extra` arrays saved with it."""
        with np.load(path) as stored:
            self.load_state({name: stored[name] for name in stored.files if not name.startswith(EXTRA_PREFIX)})
            return {name[len(EXTRA_PREFIX):]: stored[name] for name in stored.files if name.startswith(EXTRA_PREFIX)}

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
        """A short hash of the whole state: equal digests mean identical memories."""
        digest = hashlib.sha256()
        for name, array in sorted(self.state().items()):
            digest.update(name.encode())
            digest.update(np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()[:16]
