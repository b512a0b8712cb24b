"""Digests of what short training runs produce, to show that a change to the code left behaviour unchanged bit
for bit: every logged episode (episodes.csv), every log point (metrics.csv), and every tensor and count of the
final checkpoint (weights, optimizer slots, counters, each rank's replay shard). Wall-clock columns are left out,
since they change from run to run; everything else must repeat exactly.

    .venv/bin/python studies/behaviour_digests.py --out=before.json          # on the old code
    .venv/bin/python studies/behaviour_digests.py --expect=before.json       # on the new code: exits 1 on a change

The runs: DQN CartPole at 1 and 2 ranks, DQN MinAtar Breakout at 1 rank, PQN CartPole at 1 and 2 ranks, each from
its preset with a shorter budget (two checkpoints, an evaluation where the preset has one); with
--only=distributional the CartPole presets of QR-DQN (1 and 2 ranks), IQN and C51 (plain and with noisy networks).
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import os
import pathlib
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
PYTHON = sys.executable

# (name, ranks, flags): each a preset cut to a budget that updates for thousands of steps in a minute or two.
RUNS = [
    ("dqn_cartpole_np1", 1, ["--flagfile=configs/cartpole.flags", "--total_env_steps=20000",
                             "--checkpoint_interval_env_steps=10000", "--checkpoint_replay"]),
    ("dqn_cartpole_np2", 2, ["--flagfile=configs/cartpole.flags", "--total_env_steps=20000",
                             "--checkpoint_interval_env_steps=10000", "--checkpoint_replay"]),
    ("dqn_minatar_breakout_np1", 1, ["--flagfile=configs/minatar.flags", "--total_env_steps=12000",
                                     "--checkpoint_interval_env_steps=6000", "--log_interval_env_steps=2000",
                                     "--checkpoint_replay"]),
    ("pqn_cartpole_np1", 1, ["--flagfile=configs/cartpole_pqn.flags", "--total_env_steps=20480",
                             "--checkpoint_interval_env_steps=10240", "--log_interval_env_steps=2048"]),
    ("pqn_cartpole_np2", 2, ["--flagfile=configs/cartpole_pqn.flags", "--total_env_steps=20480",
                             "--checkpoint_interval_env_steps=10240", "--log_interval_env_steps=2048"]),
    # The distributional agents (not in the default set, whose digests go back to version 0.2): each CartPole
    # preset cut as DQN's, QR-DQN also at 2 ranks; C51 and QR-DQN with noisy networks, IQN with its sampled levels.
    ("qrdqn_cartpole_np1", 1, ["--flagfile=configs/cartpole_qrdqn.flags", "--total_env_steps=20000",
                               "--checkpoint_interval_env_steps=10000", "--checkpoint_replay"]),
    ("qrdqn_cartpole_np2", 2, ["--flagfile=configs/cartpole_qrdqn.flags", "--total_env_steps=20000",
                               "--checkpoint_interval_env_steps=10000", "--checkpoint_replay"]),
    ("iqn_cartpole_np1", 1, ["--flagfile=configs/cartpole_iqn.flags", "--total_env_steps=20000",
                             "--checkpoint_interval_env_steps=10000", "--checkpoint_replay"]),
    ("c51_cartpole_np1", 1, ["--flagfile=configs/cartpole_c51.flags", "--total_env_steps=20000",
                             "--checkpoint_interval_env_steps=10000", "--checkpoint_replay"]),
    ("c51_noisy_cartpole_np1", 1, ["--flagfile=configs/cartpole_c51.flags", "--noisy_nets", "--total_env_steps=20000",
                                   "--checkpoint_interval_env_steps=10000", "--checkpoint_replay"]),
]
# The runs --only=all (or no --only) takes: the five whose digests every record since version 0.2 holds.
DEFAULT_RUNS = ("dqn_cartpole_np1", "dqn_cartpole_np2", "dqn_minatar_breakout_np1", "pqn_cartpole_np1",
                "pqn_cartpole_np2")
DISTRIBUTIONAL_RUNS = ("qrdqn_cartpole_np1", "qrdqn_cartpole_np2", "iqn_cartpole_np1", "c51_cartpole_np1",
                       "c51_noisy_cartpole_np1")
# Columns that hold wall-clock time or speed: they differ between any two runs.
CLOCK_COLUMNS = {"wall_s", "wall_time_s", "env_steps_per_second"}
CLOCK_COUNTERS = {"wall_s", "time"}  # seconds of training; the time of day it was written
# The pickled emulators in a replay shard: their bytes differ between two runs of the same code (the pickle's
# layout, not the emulators' state, which the exact-resume test checks by the episodes that follow).
UNSTABLE_SHARD_KEYS = {"extra_emulators"}


def with_rank_states_named_as_before(counters: dict) -> dict:
    """The counters with each rank state's keys as checkpoints before version 0.3 named them: DQN's
    env_steps_since_update was update_credit, and PQN saved an update_credit of 0 that it no longer saves. For
    --expect against digests taken before that rename: what a rank keeps must be the same, under its old name."""
    for state in counters.get("rank_states") or []:
        state["update_credit"] = state.pop("env_steps_since_update", state.get("update_credit", 0))
    return counters


def csv_digest(path: pathlib.Path) -> str:
    """sha256 of a CSV with its clock columns removed."""
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    keep = [i for i, name in enumerate(rows[0]) if name not in CLOCK_COLUMNS]
    text = io.StringIO()
    csv.writer(text).writerows([[row[i] for i in keep] for row in rows])
    return hashlib.sha256(text.getvalue().encode()).hexdigest()


def checkpoint_digests(path: pathlib.Path, names_before_0_3: bool = False) -> dict:
    """sha256 of the checkpoint's tensors (by name), its counters without wall time, and each replay shard."""
    import numpy as np
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(path / "state"))
    tensors = hashlib.sha256()
    for name in sorted(reader.get_variable_to_shape_map()):
        if name == "_CHECKPOINTABLE_OBJECT_GRAPH":
            continue
        value = np.asarray(reader.get_tensor(name))
        tensors.update(f"{name}|{value.dtype}|{value.shape}|".encode())
        tensors.update(value.tobytes())
    counters = json.loads((path / "counters.json").read_text())
    for key in CLOCK_COUNTERS:
        counters.pop(key, None)
    if names_before_0_3:
        counters = with_rank_states_named_as_before(counters)
    digests = {"tensors": tensors.hexdigest(),
               "counters": hashlib.sha256(json.dumps(counters, sort_keys=True).encode()).hexdigest()}
    for shard in sorted(path.glob("replay-rank*.npz")):
        with np.load(shard, allow_pickle=False) as arrays:
            shard_hash = hashlib.sha256()
            for key in sorted(set(arrays.files) - UNSTABLE_SHARD_KEYS):
                shard_hash.update(f"{key}|{arrays[key].dtype}|{arrays[key].shape}|".encode())
                shard_hash.update(np.ascontiguousarray(arrays[key]).tobytes())
        digests[shard.stem] = shard_hash.hexdigest()
    return digests


def run_one(name: str, ranks: int, flags, workdir: pathlib.Path, names_before_0_3: bool = False) -> dict:
    logdir = workdir / name
    command = [PYTHON, "-m", "hvd_dqn.train", *flags, f"--logdir={logdir}", "--seed=0", "--alsologtostderr"]
    if ranks > 1:
        horovodrun = str(pathlib.Path(PYTHON).parent / "horovodrun")
        command = [horovodrun, "-np", str(ranks), "--gloo", *command]
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{name}: the run failed (exit {result.returncode}):\n{result.stderr[-3000:]}")
    checkpoints = sorted((logdir / "checkpoints").glob("ckpt-*"))
    return {"episodes.csv": csv_digest(logdir / "episodes.csv"), "metrics.csv": csv_digest(logdir / "metrics.csv"),
            "checkpoint": checkpoint_digests(checkpoints[-1], names_before_0_3),
            "checkpoint_name": checkpoints[-1].name}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the digests to this JSON file")
    parser.add_argument("--expect", help="compare with the digests in this JSON file; exit 1 if any differs")
    parser.add_argument("--only", default="", help="comma-separated run names, or 'distributional' for the "
                        "QR-DQN, IQN and C51 runs, or 'every' for all ten (default: the five DQN and PQN runs)")
    parser.add_argument("--rank_state_names_before_0_3", action="store_true",
                        help="digest the counters with the rank states' keys as before version 0.3 "
                             "(for --expect against digests taken then)")
    args = parser.parse_args()
    names = {"": DEFAULT_RUNS, "distributional": DISTRIBUTIONAL_RUNS,
             "every": tuple(run[0] for run in RUNS)}.get(args.only, tuple(args.only.split(",")))
    unknown = set(names) - {run[0] for run in RUNS}
    if unknown:
        raise SystemExit(f"--only: unknown runs {', '.join(sorted(unknown))}; the runs are "
                         f"{', '.join(run[0] for run in RUNS)}")
    chosen = [run for run in RUNS if run[0] in names]
    expected = json.loads(pathlib.Path(args.expect).read_text()) if args.expect else None
    digests, differ = {}, []
    with tempfile.TemporaryDirectory(prefix="digests-") as workdir:
        for name, ranks, flags in chosen:
            digests[name] = run_one(name, ranks, flags, pathlib.Path(workdir), args.rank_state_names_before_0_3)
            verdict = ""
            if expected is not None:
                same = expected.get(name) == digests[name]
                verdict = "  same" if same else "  DIFFERENT"
                if not same:
                    differ.append(name)
            print(f"{name}: {json.dumps(digests[name], sort_keys=True)}{verdict}", flush=True)
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
    if differ:
        raise SystemExit(f"behaviour changed in: {', '.join(differ)}")


if __name__ == "__main__":
    main()
