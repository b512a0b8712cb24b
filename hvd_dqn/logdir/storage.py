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
import contextlib
import os
import re
import shutil
import tempfile
from typing import List, Optional, Sequence

from absl import logging

from hvd_dqn.logdir.names import COMPLETE_MARKER, checkpoint_name_matches

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
    """One line for a storage library's error (botocore's can span several). gcsfs's FileNotFoundError says
    only the URL it was refused at, so a missing bucket or object is named as such."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if isinstance(error, FileNotFoundError) and "not found" not in text.lower() and "no such" not in text.lower():
        text = f"not found: {text}"
    return text[:300]


@contextlib.contextmanager
def _store_errors(message: str):
    """Turns any failure of the store inside the block into a StorageError of `message` and its reason. Any,
    because s3fs and gcsfs raise OSError subclasses but botocore raises its own (NoCredentialsError)."""
    try:
        yield
    except StorageError:
        raise
    except Exception as error:
        raise StorageError(f"{message} ({describe(error)})") from None


def join(url: str, *parts: str) -> str:
    return "/".join([url.rstrip("/"), *parts])


def complete_checkpoints(url: str) -> List[str]:
    """URLs of the complete checkpoints under object-store logdir `url`, oldest first."""
    fs, root = open_store(url)
    with _store_errors(f"{url}: cannot list its checkpoints"):
        entries = fs.ls(f"{root}/checkpoints", detail=False) if fs.exists(f"{root}/checkpoints") else []
        names = sorted(os.path.basename(entry.rstrip("/")) for entry in entries)
        return [join(url, "checkpoints", name) for name in names
                if checkpoint_name_matches(name) and fs.exists(f"{root}/checkpoints/{name}/{COMPLETE_MARKER}")]


def fetch_checkpoint(url: str, local_root: str) -> str:
    """Copies object-store checkpoint `url` (.../checkpoints/ckpt-N) into `local_root`/ckpt-N and returns that
    folder: everything but the replay shards (acting needs none), its COMPLETE marker last, so that the local
    copy looks complete only once it is."""
    fs, root = open_store(url)
    local = os.path.join(local_root, os.path.basename(url.rstrip("/")))
    shutil.rmtree(local, ignore_errors=True)
    os.makedirs(local)
    try:
        with _store_errors(f"{url}: cannot read it"):
            names = sorted(os.path.basename(entry) for entry in fs.ls(root, detail=False))
            for name in names:
                if name == COMPLETE_MARKER or name.startswith("replay-rank"):
                    continue
                fs.get_file(f"{root}/{name}", os.path.join(local, name))
            if COMPLETE_MARKER in names:
                fs.get_file(f"{root}/{COMPLETE_MARKER}", os.path.join(local, COMPLETE_MARKER))
    except StorageError:
        shutil.rmtree(local, ignore_errors=True)  # no partial copy left to be taken for a checkpoint
        raise
    return local


def fetch_files(url: str, names: Sequence[str], local_dir: str) -> List[str]:
    """Copies the files `names` of object-store logdir `url` that exist into `local_dir`; returns their names."""
    fs, root = open_store(url)
    fetched = []
    with _store_errors(f"{url}: cannot read it"):
        if not fs.exists(root):
            raise StorageError(f"{url}: no such logdir (nothing stored under it)")
        for name in names:
            if fs.exists(f"{root}/{name}"):
                fs.get_file(f"{root}/{name}", os.path.join(local_dir, name))
                fetched.append(name)
    return fetched


def scratch_folder(prefix: str) -> str:
    """A local folder for copies of stored files, removed when the process exits."""
    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def check_writable(url: str) -> None:
    """Writes and deletes a probe object under `url`, so a missing bucket, missing credentials or a read-only
    store is one line at start-up rather than a failure at the first checkpoint."""
    fs, root = open_store(url)
    probe = f"{root}/.write-probe-{os.getpid()}"
    with _store_errors(f"{url}: cannot write there"):
        fs.pipe_file(probe, b"ok")
        fs.rm_file(probe)


class LogdirMirror:
    """One rank's local working copy of an object-store logdir, for training.

    TensorFlow, the CSV writers and the replay shards write into `local` exactly as into a local logdir; this
    class uploads what they wrote: the logs (config.json, metrics.csv, episodes.csv, TensorBoard events) at
    every log point, and each checkpoint once complete, its COMPLETE marker last, so a reader never takes a
    half-uploaded checkpoint for a whole one. Every rank has its own mirror (a rank never reads another's
    local files), so ranks on different hosts need nothing shared but the store. Every failure is a
    StorageError naming the URL."""

    def __init__(self, url: str, rank: int):
        self.url = url.rstrip("/")
        self.fs, self.root = open_store(self.url)
        self.local = scratch_folder(f"hvd_dqn_logdir_rank{rank}_")

    def _remote(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def _do(self, what: str, operation, *args):
        with _store_errors(f"{self.url}: cannot {what}"):
            return operation(*args)

    # --- logs ------------------------------------------------------------------------------------------
    def upload_logs(self) -> None:
        """Uploads the files at the top of the local logdir (whole files: objects cannot be appended to)."""
        for name in sorted(os.listdir(self.local)):
            path = os.path.join(self.local, name)
            if os.path.isfile(path) and not name.startswith("."):
                self._do(f"upload {name}", self.fs.put_file, path, self._remote(name))

    def try_upload_logs(self) -> None:
        """`upload_logs` at a log point: a failure is only a warning (the next log point uploads the whole files
        again); a checkpoint that cannot be stored, by contrast, stops the job."""
        try:
            self.upload_logs()
        except StorageError as error:
            logging.warning("%s; the next log point tries again", error)

    def fetch_logs(self, names: Sequence[str] = ("metrics.csv", "episodes.csv")) -> None:
        """Copies the stored `names` that the local logdir lacks, so a resumed run (or a rank that has become
        rank 0 under --elastic) appends to the run's CSV files instead of replacing them."""
        for name in names:
            if not os.path.exists(os.path.join(self.local, name)) and \
                    self._do(f"read {name}", self.fs.exists, self._remote(name)):
                self._do(f"read {name}", self.fs.get_file, self._remote(name), os.path.join(self.local, name))

    # --- checkpoints -----------------------------------------------------------------------------------
    def complete_checkpoints(self) -> List[str]:
        return complete_checkpoints(self.url)

    def checkpoint_url(self, name: str) -> str:
        return join(self.url, "checkpoints", name)

    def unmark(self, name: str) -> None:
        """Removes checkpoint `name`'s COMPLETE marker if stored (a run that reaches the same env steps again
        rewrites it), before any rank uploads a file of the new one into it."""
        marker = self._remote("checkpoints", name, COMPLETE_MARKER)
        if self._do("read its checkpoints", self.fs.exists, marker):
            self._do(f"replace checkpoint {name}", self.fs.rm_file, marker)

    def upload_shard(self, local_shard: str, name: str) -> None:
        """Uploads this rank's replay shard into checkpoint `name` (not yet complete: rank 0 marks it)."""
        target = self._remote("checkpoints", name, os.path.basename(local_shard))
        self._do(f"upload {os.path.basename(local_shard)} of {name}", self.fs.put_file, local_shard, target)

    def upload_checkpoint(self, local_checkpoint: str, keep: int) -> str:
        """Rank 0: uploads complete local checkpoint folder `local_checkpoint`, its COMPLETE marker last, then
        deletes all but the newest `keep` stored checkpoints (each unmarked before its files go). Returns its
        URL."""
        name = os.path.basename(local_checkpoint.rstrip("/"))
        self.unmark(name)
        files = sorted(os.listdir(local_checkpoint))
        for file_name in [file_name for file_name in files if file_name != COMPLETE_MARKER] + [COMPLETE_MARKER]:
            self._do(f"upload {file_name} of {name}", self.fs.put_file, os.path.join(local_checkpoint, file_name),
                     self._remote("checkpoints", name, file_name))
        for stale in self.complete_checkpoints()[:-keep]:
            stale_name = os.path.basename(stale)
            self._do(f"delete {stale_name}", self.fs.rm_file, self._remote("checkpoints", stale_name, COMPLETE_MARKER))
            self._do(f"delete {stale_name}", self.fs.rm, self._remote("checkpoints", stale_name), True)
        return self.checkpoint_url(name)

    def fetch_checkpoint(self, url: str) -> str:
        """A local copy of stored checkpoint `url` without its replay shards, under the local logdir."""
        local_root = os.path.join(self.local, "checkpoints")
        os.makedirs(local_root, exist_ok=True)
        return fetch_checkpoint(url, local_root)

    def fetch_shard(self, url: str, local_shard: str) -> bool:
        """Copies the replay shard stored at `url` to `local_shard`; returns whether there was one."""
        remote = open_store(url)[1]
        if not self._do("read its replay shards", self.fs.exists, remote):
            return False
        os.makedirs(os.path.dirname(local_shard), exist_ok=True)
        self._do(f"read {os.path.basename(remote)}", self.fs.get_file, remote, local_shard)
        return True

    # --- the shared-logdir probe -----------------------------------------------------------------------
    def leave_probe(self, name: str) -> None:
        self._do("write there", self.fs.pipe_file, self._remote(name), b"rank 0 was here")

    def sees_and_writes(self, name: str, rank: int) -> bool:
        """Whether this rank sees rank 0's probe object `name` and can write an object of its own."""
        try:
            own = self._remote(f"{name}-rank{rank}")
            seen = self.fs.exists(self._remote(name))
            self.fs.pipe_file(own, b"ok")
            self.fs.rm_file(own)
            return seen
        except Exception:  # any failure means this rank cannot use the store; the caller names the rank
            return False

    def remove(self, name: str) -> None:
        self._do("delete its probe", self.fs.rm_file, self._remote(name))
