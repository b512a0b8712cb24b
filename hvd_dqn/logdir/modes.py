"""Files and folders that other users' processes can read as the user's umask allows.

Python's tempfile makes its files 0600 and its folders 0700 whatever the umask, so an export or a video written
through a temporary name and renamed into place would be unreadable to a serving process of another user; what
the user's own `open` or `mkdir` would have made is 0666 or 0777 less the umask."""
from __future__ import annotations

import os


def current_umask() -> int:
    """This process's umask (read by setting it and setting it back; the commands that call this are single-threaded
    at that point)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def as_if_made_here(path: str) -> None:
    """Gives `path`, and under a folder everything in it, the mode a plain open() or mkdir() would have given it
    under the current umask."""
    mask = current_umask()
    if not os.path.isdir(path):
        os.chmod(path, 0o666 & ~mask)
        return
    for folder, folders, files in os.walk(path):
        os.chmod(folder, 0o777 & ~mask)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o666 & ~mask)
