"""The TensorFlow 2.18 + tf-keras stack as hvd_dqn sets it up on import: Keras 2 behind tf.keras (Horovod's
Keras API needs it), a clear refusal when Keras 3 got there first, and TensorFlow's known import-time CUDA
chatter kept off stderr while everything else written there still arrives."""
import subprocess
import sys

from conftest import REPO, subprocess_env


def python(code: str) -> subprocess.CompletedProcess:
    env = subprocess_env()
    env.pop("TF_USE_LEGACY_KERAS", None)  # what hvd_dqn itself does, not what the tests' environment does
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
