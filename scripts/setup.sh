#!/usr/bin/env bash
# Sets up everything hvd_dqn needs on a bare Debian machine, idempotently:
#   1. Debian packages Horovod builds against (Open MPI with headers; a C++ toolchain and cmake),
#   2. a virtual environment in <repo>/.venv,
#   3. the pinned TensorFlow, then Horovod compiled against it with TensorFlow, MPI and Gloo,
#   4. hvd_dqn itself with the MinAtar, cloud, Ray and Spark extras (`pip install -e '.[minatar,cloud,ray,spark]'`),
# and fails loudly unless `horovodrun --check-build` shows TensorFlow, MPI and Gloo.
# A second run on a set-up machine only compares a stamp and takes a second or two.
#
# Environment: PYTHON (default: the first of python3.12, python3.11, python3.10, python3 that is 3.10 to 3.12,
# the versions TensorFlow 2.18's wheels and gymnasium 1.4 both cover).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
stamp="$venv/.hvd_dqn_setup_stamp"
cd "$repo"

export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-3}"  # the checks below import TensorFlow

log() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

# What the stamp certifies: the pins, the package metadata and this script. Editing any of them re-runs set-up.
# Asking for a GPU build of Horovod (HOROVOD_GPU_OPERATIONS=NCCL) is another set-up too.
wanted_stamp="$( (cat constraints.txt setup.py scripts/setup.sh; echo "${HOROVOD_GPU_OPERATIONS:-}") | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$wanted_stamp" && -x "$venv/bin/horovodrun" ]]; then
  log "already set up ($venv); delete $stamp to force a rebuild"
  exit 0
fi

# --- 1. Debian packages --------------------------------------------------------------------------------
need_debs=()
command -v mpirun >/dev/null 2>&1 || need_debs+=(openmpi-bin)
[[ -e /usr/include/x86_64-linux-gnu/openmpi || -n "$(ls /usr/lib/*/openmpi/include/mpi.h 2>/dev/null || true)" ]] \
  || need_debs+=(libopenmpi-dev)
command -v cmake >/dev/null 2>&1 || need_debs+=(cmake)
command -v g++ >/dev/null 2>&1 || need_debs+=(g++)
command -v make >/dev/null 2>&1 || need_debs+=(make)
# Tests: strace proves rank 0 is the only writer; the two-host test starts its own sshd on loopback.
command -v strace >/dev/null 2>&1 || need_debs+=(strace)
[[ -x /usr/sbin/sshd ]] || need_debs+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need_debs+=(openssh-client)
# hvd_dqn.spark_train: Spark's driver and executors run on the distribution's Java runtime (17 or 21).
command -v java >/dev/null 2>&1 || need_debs+=(default-jre-headless)
if ((${#need_debs[@]})); then
  log "installing Debian packages: ${need_debs[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  # Install services (openssh-server) without starting them: the tests start their own sshd, listening on
  # loopback addresses only. A policy-rc.d that exits 101 is Debian's way to say "do not start".
  policy=/usr/sbin/policy-rc.d
  added_policy=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo_cmd[@]}" tee "$policy" >/dev/null && "${sudo_cmd[@]}" chmod +x "$policy"
    added_policy=1
  fi
  status=0
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${need_debs[@]}" \
    >"${TMPDIR:-/tmp}/hvd_dqn_apt.log" 2>&1 || status=$?
  [[ $added_policy -eq 1 ]] && "${sudo_cmd[@]}" rm -f "$policy"
  [[ $status -eq 0 ]] || die "apt-get could not install ${need_debs[*]}; see ${TMPDIR:-/tmp}/hvd_dqn_apt.log"
fi

# --- 2. The virtual environment ------------------------------------------------------------------------
supported='(3, 10) <= sys.version_info[:2] <= (3, 12)'
supported_text="3.10, 3.11 or 3.12 (TensorFlow 2.18's wheels cover 3.9-3.12; gymnasium 1.4 needs 3.10+)"
pick_python() {
  local candidate
  local candidates=(python3.12 python3.11 python3.10 python3)
  # A PYTHON the user names is the only candidate: falling back to another would hide their mistake.
  [[ -n "${PYTHON:-}" ]] && candidates=("$PYTHON")
  for candidate in "${candidates[@]}"; do
    command -v "$candidate" >/dev/null 2>&1 || continue
    # Running it also weeds out pyenv shims that are on PATH but name a version that is not active.
    if "$candidate" -c "import sys; sys.exit(0 if $supported else 1)" 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  return 1
}
python_version() { "$1" -c 'import platform; print(platform.python_version())' 2>/dev/null; }
# What this machine offers on PATH, for the error messages: "python3.11 is 3.11.2, python3 is 3.11.2".
found_pythons() {
  local candidate version found=()
  for candidate in python3.13 python3.12 python3.11 python3.10 python3; do
    version="$(python_version "$candidate")" || continue
    found+=("$candidate is $version")
  done
  ((${#found[@]})) && (IFS=,; echo "${found[*]}" | sed 's/,/, /g') || echo "no python3 at all"
}
if [[ -x "$venv/bin/python" ]] && ! "$venv/bin/python" -c "import sys; sys.exit(0 if $supported else 1)"; then
  log "$venv has Python $(python_version "$venv/bin/python"), which this stack does not support: re-creating it"
  rm -rf "$venv"
fi
if [[ ! -x "$venv/bin/python" ]]; then
  if ! python="$(pick_python)"; then
    if [[ -n "${PYTHON:-}" ]]; then
      given="$(python_version "$PYTHON" || echo "not a Python that runs")"
      die "PYTHON=$PYTHON is $given; need Python $supported_text. Point PYTHON= at one of those, or unset it (on PATH: $(found_pythons))"
    fi
    die "need Python $supported_text; found: $(found_pythons). Install one, or point PYTHON=/path/to/python3.12 at it"
  fi
  log "creating $venv with $("$python" --version) ($(command -v "$python"))"
  if ! "$python" -m venv "$venv" 2>/dev/null; then
    log "python venv module missing; installing python3-venv"
    sudo_cmd=(); [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq python3-venv
    rm -rf "$venv"; "$python" -m venv "$venv"
  fi
fi
log "using $("$venv/bin/python" --version) in $venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
"${pip[@]}" install --upgrade "pip>=23" wheel "setuptools<70"

# --- 3. TensorFlow, then Horovod built against it -------------------------------------------------------
log "installing pinned TensorFlow and Horovod's build requirements"
"${pip[@]}" install -c constraints.txt tensorflow tf-keras numpy cloudpickle psutil pyyaml packaging cffi

# Horovod's TensorFlow ops link against one TensorFlow's C++ ABI. pip's own wheel cache is keyed by the sdist
# alone, so after a TensorFlow upgrade it would hand back a wheel built against the old one: hvd_dqn keeps its
# own cache, one folder per Horovod, TensorFlow and Python version, and records what the venv's Horovod was
# built against so that an upgraded venv rebuilds.
horovod_pin="$(grep -E '^horovod==' constraints.txt)"
tf_version="$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("tensorflow"))')"
py_tag="$("$venv/bin/python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')"
# A GPU build (HOROVOD_GPU_OPERATIONS=NCCL, as deploy/Dockerfile sets it) is another wheel than the CPU one.
gpu_operations="${HOROVOD_GPU_OPERATIONS:-}"
build_id="${horovod_pin#horovod==}-tf$tf_version-$py_tag${gpu_operations:+-${gpu_operations,,}}"
wheel_cache="${XDG_CACHE_HOME:-$HOME/.cache}/hvd_dqn/horovod-$build_id"
built_against="$venv/.horovod_built_against"
if [[ "$(cat "$built_against" 2>/dev/null)" != "$build_id" ]] \
   || ! "$venv/bin/python" -c 'import horovod.tensorflow' >/dev/null 2>&1 \
   || ! "$venv/bin/horovodrun" --check-build 2>/dev/null | grep -q '\[X\] TensorFlow'; then
  "${pip[@]}" uninstall -y horovod >/dev/null 2>&1 || true
  if ! compgen -G "$wheel_cache/horovod-*.whl" >/dev/null; then
    log "building Horovod $build_id with TensorFlow, MPI and Gloo (4-7 minutes on 2 cores; kept in $wheel_cache)"
    mkdir -p "$wheel_cache.partial"
    # --no-build-isolation: the build must see the TensorFlow installed above, or it silently builds no
    # framework support. Never use the horovod[tensorflow] extra: it pulls an unpinned, newer TensorFlow.
    HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 \
    HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS="-j$(nproc)" \
      "${pip[@]}" wheel --no-build-isolation --no-deps --no-cache-dir -w "$wheel_cache.partial" "$horovod_pin"
    rm -rf "$wheel_cache" && mv "$wheel_cache.partial" "$wheel_cache"  # a half-built cache is never used
  else
    log "installing Horovod $build_id from $wheel_cache"
  fi
  "${pip[@]}" install --no-deps "$wheel_cache"/horovod-*.whl
  "${pip[@]}" install -c constraints.txt "$horovod_pin"  # its Python dependencies, pinned
  echo "$build_id" >"$built_against"
fi

# --- 4. hvd_dqn itself -----------------------------------------------------------------------------------
log "installing hvd_dqn (editable) with its MinAtar, cloud, Ray and Spark extras, and its test requirements"
"${pip[@]}" install -c constraints.txt -e '.[minatar,cloud,ray,spark]' pytest pytest-xdist jsonschema 'moto[server]' gcp-storage-emulator

# --- TensorFlow's import chatter, kept out of every process of the venv -----------------------------------------
# hvd_dqn's own processes drop TensorFlow 2.18's three CUDA-factory lines when they import it
# (hvd_dqn/quiet_tensorflow.py), but horovodrun's launcher imports TensorFlow too (its check of the frameworks
# Horovod was built with, in a forked process), and those lines would stand above every job's output, a one-line
# error's included. A .pth file runs at every start of the venv's interpreter: it imports hvd_dqn (which hooks
# TensorFlow's first import and selects Keras 2) wherever hvd_dqn is installed, so the fork inherits the hook.
# HVD_DQN_NO_STARTUP_IMPORT=1 in the environment leaves a process bare (the tests of the bare stack use it).
site_packages="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
printf '%s\n' 'import os; exec("try:\n import hvd_dqn\nexcept Exception:\n pass") if not os.environ.get("HVD_DQN_NO_STARTUP_IMPORT") else None' \
  >"$site_packages/hvd_dqn_quiet_tensorflow.pth"

# --- A one-line fix to tf-keras 2.18.0 --------------------------------------------------------------------
# tf-keras seeds its initializers with random.randint(1, 1e9); Python 3.12 refuses a float bound there
# ("'float' object cannot be interpreted as an integer"), so every layer built after a seed is set fails.
# The same bound as an int draws the very same numbers on 3.10 and 3.11. Re-applied on every set-up (a pip
# reinstall would undo it); a no-op once applied.
tf_keras_src="$("$venv/bin/python" -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("tf_keras").origin))')/src"
sed -i 's/randint(1, 1e9)/randint(1, 10**9)/' "$tf_keras_src/backend.py" "$tf_keras_src/utils/tf_utils.py"
! grep -q 'randint(1, 1e9)' "$tf_keras_src/backend.py" "$tf_keras_src/utils/tf_utils.py" \
  || die "could not apply the Python 3.12 fix to tf-keras in $tf_keras_src"

# --- Verify ------------------------------------------------------------------------------------------------
build="$("$venv/bin/horovodrun" --check-build 2>&1)" || die "horovodrun --check-build failed:\n$build"
for want in TensorFlow MPI Gloo; do
  grep -q "\[X\] $want" <<<"$build" || die "Horovod was built without $want support. --check-build says:
$build"
done
"$venv/bin/python" -c 'import hvd_dqn, tensorflow, horovod.tensorflow.keras, gymnasium, ale_py, minatar, s3fs' \
  || die "the installed packages do not import"
keras="$("$venv/bin/python" -c 'import hvd_dqn, tensorflow as tf; print(tf.keras.__name__)' 2>/dev/null)"
[[ "$keras" == tf_keras* ]] || die "tf.keras is '$keras' after importing hvd_dqn, not tf-keras (Keras 2)"
# A GPU machine: whether TensorFlow sees its GPUs and Horovod has NCCL, each with its fix (training still runs,
# on the CPU, if not).
if [[ -e /proc/driver/nvidia/version ]]; then
  "$venv/bin/python" -m hvd_dqn.plan.calibrate --check_gpu \
    || log "warning: this machine has an NVIDIA driver but the GPU set-up above is incomplete"
fi
echo "$wanted_stamp" >"$stamp"
log "done: Horovod $("$venv/bin/python" -c 'import horovod; print(horovod.__version__)') with TensorFlow, MPI and Gloo in $venv"
