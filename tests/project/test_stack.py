"""The TensorFlow 2.18 + tf-keras stack as hvd_dqn sets it up on import: Keras 2 behind tf.keras (Horovod's
Keras API needs it), a clear refusal when Keras 3 got there first, and TensorFlow's known import-time CUDA
chatter kept off stderr while everything else written there still arrives."""
import os
import shutil
import subprocess
import sys

import pytest

from hvd_dqn import quiet_tensorflow

from conftest import REPO, subprocess_env


def python(code: str, bare: bool = True) -> subprocess.CompletedProcess:
    """`code` in a new interpreter of the venv. bare: without the venv's start-up import of hvd_dqn (the .pth file
    scripts/setup.sh writes), so what a process does before and without importing hvd_dqn shows."""
    env = subprocess_env()
    # What hvd_dqn itself sets, not what the tests' environment does.
    env.pop("TF_USE_LEGACY_KERAS", None)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    if bare:
        env["HVD_DQN_NO_STARTUP_IMPORT"] = "1"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                          cwd=REPO)


def test_importing_hvd_dqn_puts_keras_2_behind_tf_keras_for_horovod():
    result = python("import hvd_dqn, tensorflow as tf, horovod.tensorflow.keras as hvd_keras\n"
                    "print(tf.keras.__name__, tf.keras.optimizers.Adam.__module__)\n"
                    "hvd_keras.init()\n"
                    "optimizer = hvd_keras.DistributedOptimizer(tf.keras.optimizers.Adam(1e-3))\n"
                    "print(type(optimizer).__mro__[1].__module__)")
    assert result.returncode == 0, result.stderr
    keras_module, adam_module, wrapped_module = result.stdout.split()
    assert keras_module.startswith("tf_keras.") and adam_module.startswith("tf_keras.")
    assert wrapped_module.startswith("tf_keras.")  # Horovod wrapped a Keras-2 optimizer


def test_keras_3_loaded_before_hvd_dqn_is_refused_with_one_line():
    result = python("import tensorflow as tf\ntf.keras.layers.Dense\nimport hvd_dqn")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "ImportError: tf.keras is already keras._tf_keras.keras (Keras 3) in this process; hvd_dqn needs Keras 2 "
        "(tf-keras). Import hvd_dqn before using tf.keras, or set TF_USE_LEGACY_KERAS=1 in the environment.")


def test_tensorflow_import_chatter_is_dropped_and_nothing_else():
    bare = python("import tensorflow")
    assert "Unable to register cuDNN factory" in bare.stderr  # what the filter is for, seen without hvd_dqn
    quiet = python("import sys, hvd_dqn, tensorflow\nprint('after the import', file=sys.stderr)")
    assert quiet.returncode == 0
    assert quiet.stderr.splitlines() == ["after the import"]


def test_every_process_of_the_venv_starts_with_the_filter_and_keras_2():
    """The venv's .pth imports hvd_dqn at every start, so a process that imports TensorFlow itself (horovodrun's
    launcher, a user's script) gets neither the chatter nor Keras 3."""
    started = python("import sys, tensorflow as tf\nprint(tf.keras.__name__)\nprint('after', file=sys.stderr)",
                     bare=False)
    assert started.returncode == 0 and started.stderr.splitlines() == ["after"], started.stderr
    assert started.stdout.startswith("tf_keras")


def test_the_filter_passes_every_other_line_as_written():
    result = python(
        "import os, re\n"
        "from hvd_dqn.quiet_tensorflow import KNOWN_IMPORT_NOISE, stderr_without\n"
        "with stderr_without(KNOWN_IMPORT_NOISE):\n"
        "    os.write(2, b'kept 1\\n')\n"
        "    os.write(2, b'E0000 cuda_blas.cc] Unable to register cuBLAS factory: Attempting to register factory "
        "for plugin cuBLAS when one has already been registered\\n')\n"
        "    os.write(2, b'kept 2, no newline at the end')\n"
        "os.write(2, b'\\nafter\\n')")
    assert result.returncode == 0
    assert result.stderr.splitlines() == ["kept 1", "kept 2, no newline at the end", "after"]


# A CUDA driver library with no GPU behind it, as nvidia/cuda images and CUDA's compat packages carry: the
# driver loads and cuInit answers CUDA_ERROR_NO_DEVICE (100).
FAKE_LIBCUDA_SOURCE = r"""
typedef int CUresult;
CUresult cuInit(unsigned int flags) { (void)flags; return 100; }
CUresult cuDriverGetVersion(int *version) { *version = 12050; return 0; }
CUresult cuGetErrorName(CUresult error, const char **name) { (void)error; *name = "CUDA_ERROR_NO_DEVICE"; return 0; }
CUresult cuGetErrorString(CUresult error, const char **text) {
    (void)error; *text = "no CUDA-capable device is detected"; return 0; }
"""

# Asks TensorFlow for devices and runs an op: where the CUDA driver is initialised, and so where a host
# without a GPU gets the cuInit line.
USE_DEVICES = "import sys, tensorflow as tf\ntf.config.list_physical_devices('GPU')\nprint(int(tf.constant(2) + 1))\n"


def without_a_gpu(tmp_path, driver_library: str) -> dict:
    """The environment of a GPU-less host: with TensorFlow's own stub answering for a missing libcuda.so.1
    ("none"), or with a driver library that finds no device ("no-device"). TF_CPP_MIN_LOG_LEVEL=2 is
    hvd_dqn's default, spelt out so that the line is shown unless hvd_dqn drops it."""
    if quiet_tensorflow.nvidia_driver_present():
        pytest.skip("this host has an NVIDIA driver; the condition under test is a host without one")
    env = subprocess_env()
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["HVD_DQN_NO_STARTUP_IMPORT"] = "1"  # each process imports hvd_dqn itself, or not at all
    if driver_library == "no-device":
        if shutil.which("gcc") is None:
            pytest.skip("gcc is needed to build the fake libcuda.so.1 (scripts/setup.sh installs g++ with it)")
        source = tmp_path / "fake_libcuda.c"
        source.write_text(FAKE_LIBCUDA_SOURCE)
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "libcuda.so.1"), str(source)], check=True)
        env["LD_LIBRARY_PATH"] = f"{tmp_path}{os.pathsep}{env.get('LD_LIBRARY_PATH', '')}"
    return env


@pytest.mark.parametrize("driver_library", ["none", "no-device"])
def test_no_cuda_noise_and_one_line_errors_on_a_host_without_a_gpu(tmp_path, driver_library):
    env = without_a_gpu(tmp_path, driver_library)
    # The condition is real: TensorFlow alone writes the cuInit line here.
    bare = subprocess.run([sys.executable, "-c", USE_DEVICES], capture_output=True, text=True, timeout=120,
                          env=env, cwd=REPO)
    expected_error = "UNKNOWN ERROR (303)" if driver_library == "none" else "CUDA_ERROR_NO_DEVICE"
    assert bare.returncode == 0 and "failed call to cuInit" in bare.stderr and expected_error in bare.stderr, \
        bare.stderr
    quiet = subprocess.run([sys.executable, "-c", "import hvd_dqn\n" + USE_DEVICES], capture_output=True,
                           text=True, timeout=120, env=env, cwd=REPO)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "3\n", "")
    # A command's one-line error after TensorFlow has started (looking for checkpoints needs it; in a folder that
    # exists, since a missing one is refused before).
    (tmp_path / "run").mkdir()
    result = subprocess.run([sys.executable, "-m", "hvd_dqn.train", f"--logdir={tmp_path}/run", "--resume"],
                            capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert (result.returncode, result.stderr) == (
        2, f"hvd_dqn.train: error: --resume: no complete checkpoint under {tmp_path}/run/checkpoints\n")


def test_cuda_errors_stay_visible_where_an_nvidia_driver_is_present(tmp_path):
    """Where the driver's files are there, a cuInit that fails is a fault to see: nothing of CUDA's is dropped."""
    env = without_a_gpu(tmp_path, "none")
    marker = tmp_path / "version"
    marker.write_text("NVRM version: a driver this test stands in for\n")
    result = subprocess.run(
        [sys.executable, "-c", f"import hvd_dqn.quiet_tensorflow as q\nq.NVIDIA_DRIVER_MARKERS = ({str(marker)!r},)\n"
                               + USE_DEVICES],
        capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert result.returncode == 0 and result.stdout == "3\n"
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "failed call to cuInit" in lines[0] and "UNKNOWN ERROR (303)" in lines[0], lines


def test_hvd_dqn_sets_tensorflows_log_threshold_only_where_none_is_set():
    assert python("import os, hvd_dqn\nprint(os.environ['TF_CPP_MIN_LOG_LEVEL'])").stdout == (
        f"{quiet_tensorflow.DEFAULT_TF_CPP_MIN_LOG_LEVEL}\n")
    assert python("import os\nos.environ['TF_CPP_MIN_LOG_LEVEL'] = '0'\nimport hvd_dqn\n"
                  "print(os.environ['TF_CPP_MIN_LOG_LEVEL'])").stdout == "0\n"
