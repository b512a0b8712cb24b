"""hvd_dqn: data-parallel Deep Q-Networks with Horovod and TensorFlow-Keras.

The layout (docs/architecture.md, "Rooms"): the commands a user runs are the modules at the top (`train`,
`evaluate`, `export`, `ray_train`, `spark_train`; each `python -m hvd_dqn.NAME --help`) and `runner` (the same
from Python), with what they share (`flags`, `config`, `cli`, `envs`, `rank_split`, `collectives`); training's
parts are the subpackages `agent/` (the agents' registry and interface, DQN, QR-DQN, IQN, C51 and PQN, networks,
optimizers, policies), `memories/` (each rank's replay memory or rollout), `run/` (one rank's part of a job: the
loop, acting, checkpoints, elastic training) and `logdir/` (what a run leaves behind); `baselines/` holds
published curves as data. Apart from training: `measure/` (benchmarks), `plan/` (cost model, calibration, scaling
study, noise scale, step headroom) and `reports/` (curves, scores, a run against a baseline, an Atari suite).

hvd_dqn runs on Keras 2 (the `tf-keras` package): TensorFlow 2.16+ makes `tf.keras` Keras 3, whose optimizers
Horovod 0.28.1's DistributedOptimizer cannot wrap (horovod issue #4290). TensorFlow picks the Keras behind
`tf.keras` from TF_USE_LEGACY_KERAS when `tf.keras` is first used, so importing this package selects Keras 2 for
this process and every process it starts (horovodrun's ranks, Ray workers, evaluation subprocesses) before
any of hvd_dqn's modules touch `tf.keras`.
"""
import os
import sys

from hvd_dqn import quiet_tensorflow

os.environ["TF_USE_LEGACY_KERAS"] = "1"
quiet_tensorflow.install()  # TensorFlow's import-time CUDA chatter, see quiet_tensorflow.py


def _refuse_keras_3_already_loaded():
    """If TensorFlow was imported and `tf.keras` used before this package, it is Keras 3 for good."""
    tensorflow = sys.modules.get("tensorflow")
    if tensorflow is None:
        return
    keras_module = getattr(getattr(tensorflow, "keras", None), "__name__", "")
    if keras_module and not keras_module.startswith("tf_keras"):
        raise ImportError(
            f"tf.keras is already {keras_module} (Keras 3) in this process; hvd_dqn needs Keras 2 (tf-keras). "
            "Import hvd_dqn before using tf.keras, or set TF_USE_LEGACY_KERAS=1 in the environment.")


_refuse_keras_3_already_loaded()
