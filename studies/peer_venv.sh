#!/usr/bin/env bash
# Makes the environment CleanRL's scripts run in, outside hvd_dqn's venv:
#     bash studies/peer_venv.sh PEERS/cleanrl            # pqn.py (CartPole) for studies/pqn_side_by_side.py
#     bash studies/peer_venv.sh PEERS/cleanrl_atari atari   # pqn_atari_envpool.py (Atari through envpool)
#     bash studies/peer_venv.sh PEERS/dopamine dopamine     # Dopamine's JAX agents, for studies/pqn_side_by_side.py --task=atari_breakout_qrdqn
# CleanRL's pyproject pins gymnasium 0.29.1 and torch 2.4.1 (Python < 3.11). This machine's Python is 3.11 and
# PyPI's torch 2.4.1 is a CUDA build of several GB, so the studies use a CPU build of torch 2.13.0 (TORCH below;
# elsewhere: TORCH="torch==2.4.1 --index-url https://download.pytorch.org/whl/cpu"). numpy stays below 2, which
# gymnasium 0.29.1 was written for. pqn_atari_envpool.py needs envpool 0.8.4 with gym 0.23.1 (envpool 1.2's API
# and gym 0.26's step signature break it); both install on Python 3.11.
# dopamine-rl 4.1.2 asks for TensorFlow and JAX releases that do not load together (TF 2.21 with jaxlib 0.4.35
# aborts at import; tensorflow-probability 0.25 needs an attribute JAX 0.10 dropped), so the set below is pinned to
# one that runs: JAX 0.4.35 on the CPU, Flax 0.10.2, TensorFlow 2.18.1. Its atari_lib imports OpenAI baselines'
# atari_wrappers at module load for a wrapper the Dopamine protocol never uses; an empty module stands in for it.
set -euo pipefail
venv=${1:?usage: peer_venv.sh DIR [atari]}
kind=${2:-classic}
TORCH=${TORCH:-torch==2.13.0}
python3 -m venv "$venv"
if [[ "$kind" == dopamine ]]; then
  "$venv/bin/pip" install -q dopamine-rl==4.1.2 "jax[cpu]==0.4.35" jaxlib==0.4.35 flax==0.10.2 \
    tensorflow-cpu==2.18.1 tf-keras==2.18.0 tensorflow-probability==0.25.0 ale-py==0.12.1
  stand_in="$venv/stand_ins/baselines/common"
  mkdir -p "$stand_in"
  touch "$venv/stand_ins/baselines/__init__.py" "$stand_in/__init__.py" "$stand_in/atari_wrappers.py"
  site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  echo "$(cd "$venv" && pwd)/stand_ins" > "$site/dopamine_stand_ins.pth"
  JAX_PLATFORMS=cpu "$venv/bin/python" -c "import jax, flax, dopamine.jax.agents.quantile.quantile_agent, \
dopamine.discrete_domains.atari_lib; print('jax', jax.__version__, 'flax', flax.__version__)"
elif [[ "$kind" == atari ]]; then
  # shellcheck disable=SC2086
  "$venv/bin/pip" install -q $TORCH envpool==0.8.4 gym==0.23.1 "numpy<2" tyro==0.8.14 tensorboard==2.18.0
  "$venv/bin/python" -c "import torch, envpool, gym; print('torch', torch.__version__, 'envpool', envpool.__version__, 'gym', gym.__version__)"
else
  # shellcheck disable=SC2086
  "$venv/bin/pip" install -q $TORCH gymnasium==0.29.1 numpy==1.26.4 tyro==0.8.14 tensorboard==2.18.0
  "$venv/bin/python" -c "import torch, gymnasium; print('torch', torch.__version__, 'gymnasium', gymnasium.__version__)"
fi
