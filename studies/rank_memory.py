"""What a training rank costs in memory, split into what is its own and what the ranks on a host share: the figures
the memory pre-flight (hvd_dqn/run/memory_check.py) budgets with.

    .venv/bin/python studies/rank_memory.py --flagfile=configs/cartpole.flags --ranks=1,4 --env_steps=30000 \
        --out=results/memory/cartpole

Each rank count trains the preset (flags after "--" added) from scratch over MPI with evaluation and checkpoints
off, while this script reads every rank's /proc/PID/smaps_rollup twice a second and the host's MemAvailable.
Per rank it keeps the peak of its private pages (Private_Clean + Private_Dirty: the rank's own heap, tensors,
emulators and replay) and of its shared pages (file pages of TensorFlow's and Python's libraries, which the
kernel keeps once for all ranks of a host). The replay memory is allocated whole but its pages are touched only
as transitions are written, so the private peak holds the written part of it, which is reported beside it
(computed by memory_check.replay_bytes) and subtracted to give what a rank needs besides its replay. The drop
of MemAvailable from before the launch to its lowest point is what the whole job took from the host. Writes
OUT.json."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from hvd_dqn.envs import probe_spec  # noqa: E402
from hvd_dqn.flags import config_of_runs, split_run_flags  # noqa: E402
from hvd_dqn.rank_split import rank_share  # noqa: E402
from hvd_dqn.run.horovod_setup import launcher_environment  # noqa: E402
from hvd_dqn.run.memory_check import GIB, replay_bytes, smaps_fields  # noqa: E402

MIB = 2**20


def mem_available() -> int:
    with open("/proc/meminfo") as handle:
        return next(int(line.split()[1]) * 1024 for line in handle if line.startswith("MemAvailable:"))


def rank_pids() -> list:
    """The processes running hvd_dqn.train under a Python interpreter (the ranks, not their launchers)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        if b"hvd_dqn.train" in argv and b"horovodrun" not in b" ".join(argv) and b"python" in argv[0]:
            pids.append(int(entry))
    return pids


def measure(ranks: int, args, extra, logdir: str) -> dict:
    command = [os.path.join(os.path.dirname(sys.executable), "horovodrun"), "-np", str(ranks),
               "-H", f"localhost:{ranks}", "--mpi", sys.executable, "-m", "hvd_dqn.train",
               f"--flagfile={args.flagfile}", f"--logdir={logdir}", f"--total_env_steps={args.env_steps}",
               "--eval_interval_env_steps=0", "--checkpoint_interval_env_steps=0", "--stop_at_train_return=inf",
               *extra]
    before = mem_available()
    lowest = before
    peaks = {}
    with open(logdir + ".log", "w") as log:
        job = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=launcher_environment())
        while job.poll() is None:
            lowest = min(lowest, mem_available())
            for pid in rank_pids():
                fields = smaps_fields(f"/proc/{pid}/smaps_rollup")
                if not fields:
                    continue
                peak = peaks.setdefault(pid, {"private": 0, "shared": 0, "rss": 0})
                peak["private"] = max(peak["private"], fields["Private_Clean"] + fields["Private_Dirty"])
                peak["shared"] = max(peak["shared"], fields["Shared_Clean"] + fields["Shared_Dirty"])
                peak["rss"] = max(peak["rss"], fields["Rss"])
            time.sleep(0.5)
    if job.returncode != 0:
        raise SystemExit(f"{ranks} rank(s): exit status {job.returncode}; see {logdir}.log")
    if len(peaks) != ranks:
        raise SystemExit(f"{ranks} rank(s): saw {len(peaks)} rank processes; see {logdir}.log")
    config = config_of_runs("hvd_dqn.train", args.flagfile, extra)
    num_envs, capacity = rank_share(config, ranks)
    replay_full = replay_bytes(config, probe_spec(config), num_envs, capacity)
    written = min(1.0, args.env_steps / ranks / capacity)  # each rank's share of the env steps, one entry each
    replay_written = replay_full * written
    private = sorted(peak["private"] for peak in peaks.values())
    shared = sorted(peak["shared"] for peak in peaks.values())
    return {"ranks": ranks, "private_peak_mib": [round(value / MIB) for value in private],
            "shared_peak_mib": [round(value / MIB) for value in shared],
            "rss_peak_mib": sorted(round(peak["rss"] / MIB) for peak in peaks.values()),
            "replay_full_mib": round(replay_full / MIB), "replay_written_mib": round(replay_written / MIB),
            "private_besides_replay_mib": round((private[-1] - replay_written) / MIB),
            "host_drop_mib": round((before - lowest) / MIB)}


def main() -> int:
    own, extra = split_run_flags(sys.argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flagfile", required=True)
    parser.add_argument("--ranks", default="1,4", help="comma-separated rank counts, each run over MPI")
    parser.add_argument("--env_steps", type=int, default=30000, help="env steps of the job per run")
    parser.add_argument("--out", required=True, help="writes OUT.json")
    args = parser.parse_args(own)
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for ranks in (int(text) for text in args.ranks.split(",")):
            row = measure(ranks, args, extra, os.path.join(workdir, f"np{ranks}"))
            print(json.dumps(row), flush=True)
            rows.append(row)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".json", "w") as handle:
        json.dump({"flagfile": args.flagfile, "run_flags": extra, "env_steps": args.env_steps,
                   "unit": f"MiB ({GIB // MIB} to a GiB)", "runs": rows}, handle, indent=1)
        handle.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
