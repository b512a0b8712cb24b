"""TensorFlow 2.18's GPU wheel writes three lines to stderr on every import, on machines with or without GPUs,
whatever TF_CPP_MIN_LOG_LEVEL says (tensorflow/tensorflow#79268):

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    E0000 ... cuda_dnn.cc:8310] Unable to register cuDNN factory: Attempting to register factory for plugin ...
    E0000 ... cuda_blas.cc:1418] Unable to register cuBLAS factory: Attempting to register factory for plugin ...

They come from its C++ start-up, so Python's logging cannot filter them, and they would stand before every
rank's output and every one-line error of hvd_dqn's commands. `install()` (called when hvd_dqn is imported)
hooks the first import of tensorflow: while it runs, file descriptor 2 goes through a pipe, and a thread
forwards every line except these known ones to the real stderr as it arrives (so nothing else is held back,
even if the import dies). It also drops TensorFlow's own INFO records in absl's log, such as the "Sharding
callback duration: 37" that TensorFlow 2.18 logs on every checkpoint write, among hvd_dqn's progress lines.

On a host with no NVIDIA driver, the same wheel writes one more line the first time anything asks for
devices (an op, a model, `list_physical_devices`), long after the import:

    E ... cuda_driver.cc:152] failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)

(303 when no libcuda.so.1 can be loaded at all; CUDA_ERROR_NO_DEVICE when a toolkit or compat driver library
is there without a GPU). It does not depend on a CUDA toolkit being installed: no CUDA library is opened on
such a host; TF_CPP_MIN_LOG_LEVEL=3 hides it, and with it every other TensorFlow error. So on a host without
an NVIDIA driver, the hook also asks for the GPUs inside the filtered window, where the driver is initialised
once per process, and drops that line. On a host with a driver nothing is asked early and nothing of CUDA's
is dropped: a cuInit that fails there is a real fault, and hvd_dqn's default TF_CPP_MIN_LOG_LEVEL=2 shows it.
Why not install `tensorflow-cpu` on hosts without a GPU: one venv and one Horovod build often serve a
cluster's login node (no GPU) and its GPU nodes, and a CPU-only wheel chosen on the login node would make
the GPU nodes train on their CPUs without a word.
"""
from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import logging
import os
import re
import sys
import threading

from absl import logging as absl_logging

# TensorFlow's C++ log threshold where the user set none: errors (a GPU that does not initialise, a cuDNN
# that does not match) reach stderr, INFO and WARNING chatter (oneDNN, CPU features) does not.
DEFAULT_TF_CPP_MIN_LOG_LEVEL = "2"

KNOWN_IMPORT_NOISE = re.compile(
    r"All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|Unable to register (?:cuDNN|cuBLAS|cuFFT) factory: Attempting to register factory for plugin")
# What the CUDA driver's initialisation writes where there is no NVIDIA driver to initialise.
NO_DRIVER_NOISE = re.compile(r"cuda_driver\.cc:\d+\] failed call to cuInit: ")

# Files that exist wherever the NVIDIA kernel driver is loaded, on the host and inside GPU containers
# (the NVIDIA container runtime mounts them).
NVIDIA_DRIVER_MARKERS = ("/proc/driver/nvidia/version", "/dev/nvidiactl")


def nvidia_driver_present() -> bool:
    return any(os.path.exists(marker) for marker in NVIDIA_DRIVER_MARKERS)


@contextlib.contextmanager
def stderr_without(noise: re.Pattern):
    """Within the block, lines written to file descriptor 2 (by C++ or Python) that match `noise` are dropped;
    the rest reach the real stderr as they are written."""
    sys.stderr.flush()
    real_stderr = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    def forward():
        with os.fdopen(read_end, "rb") as pipe:
            for line in pipe:
                if not noise.search(line.decode("utf-8", "replace")):
                    os.write(real_stderr, line)

    forwarder = threading.Thread(target=forward, name="hvd_dqn-stderr-filter", daemon=True)
    forwarder.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(real_stderr, 2)  # the pipe's last write end closes: the forwarder reads to the end and stops
        forwarder.join(timeout=10)
        os.close(real_stderr)


class _FirstTensorFlowImport(importlib.abc.MetaPathFinder):
    """Finds `tensorflow` as the normal path finder would, with a loader that runs it inside stderr_without()."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)  # only the first import; and the lookup below must not find this finder
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            if nvidia_driver_present():
                with stderr_without(KNOWN_IMPORT_NOISE):
                    execute(module)
                return
            with stderr_without(re.compile(f"{KNOWN_IMPORT_NOISE.pattern}|{NO_DRIVER_NOISE.pattern}")):
                execute(module)
                module.config.list_physical_devices("GPU")  # the driver's one initialisation, see above

        spec.loader.exec_module = exec_module
        return spec


def _not_tensorflow_info(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING or f"{os.sep}tensorflow{os.sep}" not in record.pathname


def install() -> None:
    """Hooks the first import of tensorflow in this process, unless it has happened already, keeps
    TensorFlow's INFO records out of absl's log, and sets TensorFlow's C++ log threshold where none is set."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", DEFAULT_TF_CPP_MIN_LOG_LEVEL)
    absl_logger = absl_logging.get_absl_logger()
    if _not_tensorflow_info not in absl_logger.filters:
        absl_logger.addFilter(_not_tensorflow_info)
    if "tensorflow" not in sys.modules and not any(isinstance(f, _FirstTensorFlowImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _FirstTensorFlowImport())
