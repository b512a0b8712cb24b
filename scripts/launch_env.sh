# Sourced by the scripts that launch ranks: environment that horovodrun and Open MPI need on this kind of
# machine. Values already set by the user win.
# Open MPI refuses to run as root unless told it may (CI and containers run as root).
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT="${OMPI_ALLOW_RUN_AS_ROOT:-1}"
  export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}"
fi
# TensorFlow's C++ errors but not its INFO and WARNING chatter, as importing hvd_dqn sets it for the ranks
# (hvd_dqn/quiet_tensorflow.py); here for horovodrun too, which imports TensorFlow itself.
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
# Keras 2 (tf-keras) behind tf.keras: Horovod's Keras API does not support the Keras 3 that TensorFlow 2.18 makes
# the default. hvd_dqn sets it itself on import; exported here too, for anything a rank imports before it.
export TF_USE_LEGACY_KERAS=1
