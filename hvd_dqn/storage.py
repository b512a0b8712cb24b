"""Logdirs in object storage: `s3://bucket/prefix` (s3fs), `gs://bucket/prefix` (gcsfs) or any other fsspec URL.

Object stores have no rename and no real folders, so a checkpoint there is the set of objects under
`<logdir>/checkpoints/ckpt-N/`, complete once its COMPLETE marker exists (written last, as on a local disk);
checkpoints are found by listing. Readers (evaluate, export, plot, resume) copy what they need into a local
folder first and read it there with the same code as a local logdir. Credentials and endpoints come from the
usual places of each library (for S3: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ~/.aws, and
AWS_ENDPOINT_URL for S3-compatible stores such as MinIO or Ceph).
"""
from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
from typing import List, Optional, Sequence

from hvd_dqn.checkpoint import COMPLETE_MARKER, checkpoint_name_matches

_URL = re.compile(r"^([a-z][a-z0-9+.-]*)://")
# The library each common protocol needs, for the message when it is missing.
_PACKAGES = {"s3": "s3fs (pip install -e '.[cloud]')", "s3a": "s3fs (pip install -e '.[cloud]')",
             "gs": "gcsfs (pip install gcsfs)", "gcs": "gcsfs (pip install gcsfs)",
             "az": "adlfs (pip install adlfs)", "abfs": "adlfs (pip install adlfs)"}


class StorageError(Exception):
    """An object-store logdir cannot be used; the message names the URL and the reason in one line."""


def is_remote(path: Optional[str]) -> bool:
    """Whether `path` is an object-store URL rather than a local path (file:// counts as local)."""
    match = _URL.match(path or "")
    return bool(match) and match.group(1) != "file"


def open_store(url: str):
    """(fsspec filesystem, path inside it) for `url`. Listings are not cached: other processes write there."""
    import fsspec

    protocol = _URL.match(url).group(1)
    try:
        return fsspec.core.url_to_fs(url, use_listings_cache=False, skip_instance_cache=True)
    except ImportError:
        raise StorageError(f"{url}: needs {_PACKAGES.get(protocol, 'the fsspec backend for ' + protocol + '://')}") \
            from None
    except ValueError as error:  # fsspec: "Protocol not known"
        raise StorageError(f"{url}: {error}") from None


def describe(error: BaseException) -> str:
    """One line for a storage library's error (botocore's can span several)."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text[:300]


def join(url: str, *parts: str) -> str:
    return "/".join([url.rstrip("/"), *parts])


def complete_checkpoints(url: str) -> List[str]:
    """URLs of the complete checkpoints under object-store logdir `url`, oldest first."""
    fs, root = open_store(url)
    try:
        entries = fs.ls(f"{root}/checkpoints", detail=False) if fs.exists(f"{root}/checkpoints") else []
        names = sorted(os.path.basename(entry.rstrip("/")) for entry in entries)
        return [join(url, "checkpoints", name) for name in names
                if checkpoint_name_matches(name) and fs.exists(f"{root}/checkpoints/{name}/{COMPLETE_MARKER}")]
    except (OSError, PermissionError) as error:
        raise StorageError(f"{url}: cannot list its checkpoints ({describe(error)})") from None


def fetch_checkpoint(url: str, local_root: str) -> str:
    """Copies object-store checkpoint `url` (.../checkpoints/ckpt-N) into `local_root`/ckpt-N and returns that
    folder: everything but the replay shards (acting needs none), its COMPLETE marker last, so that the local
    copy looks complete only once it is."""
    fs, root = open_store(url)
    local = os.path.join(local_root, os.path.basename(url.rstrip("/")))
    shutil.rmtree(local, ignore_errors=True)
    os.makedirs(local)
    try:
        names = sorted(os.path.basename(entry) for entry in fs.ls(root, detail=False))
        for name in names:
            if name == COMPLETE_MARKER or name.startswith("replay-rank"):
                continue
            fs.get_file(f"{root}/{name}", os.path.join(local, name))
        if COMPLETE_MARKER in names:
            fs.get_file(f"{root}/{COMPLETE_MARKER}", os.path.join(local, COMPLETE_MARKER))
    except (OSError, PermissionError) as error:
        shutil.rmtree(local, ignore_errors=True)
        raise StorageError(f"{url}: cannot read it ({describe(error)})") from None
    return local


def fetch_files(url: str, names: Sequence[str], local_dir: str) -> List[str]:
    """Copies the files `names` of object-store logdir `url` that exist into `local_dir`; returns their names."""
    fs, root = open_store(url)
    fetched = []
    try:
        if not fs.exists(root):
            raise StorageError(f"{url}: no such logdir (nothing stored under it)")
        for name in names:
            if fs.exists(f"{root}/{name}"):
                fs.get_file(f"{root}/{name}", os.path.join(local_dir, name))
                fetched.append(name)
    except (OSError, PermissionError) as error:
        raise StorageError(f"{url}: cannot read it ({describe(error)})") from None
    return fetched


def scratch_folder(prefix: str) -> str:
    """A local folder for copies of stored files, removed when the process exits."""
    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder
