"""Env steps per second of a job with more ranks than cores, by Horovod's cycle time and controller: what the
scaling studies at 8 and 16 ranks on a 2-core machine pay for coordination rather than for training.

    .venv/bin/python studies/oversubscribed_ranks.py --flagfile=configs/cartpole.flags --ranks=16 \
        --cycles_ms=0,5 --controllers=gloo,mpi --rounds=2 --env_steps=10000 \
        --out=results/throughput/oversubscribed_cartpole_16 -- --num_envs=16

Each configuration trains the preset (flags after "--" added) from scratch for --env_steps env steps of the job,
with evaluation and checkpoints off, and its rate is taken from metrics.csv between the first log point whose
updates have begun and the last: the first update of every rank builds its training graph, which with 16 ranks
on 2 cores took about 30 s, a one-off that a window starting at --learning_starts folded into the rate.
HOROVOD_CYCLE_TIME is set for the ranks (hvd_dqn.run.horovod_setup.runtime_defaults leaves a value the user set
alone). The configurations run in an order
turned round from one round to the next, so that a drift of the machine falls on all alike; the medians over
rounds are reported. Writes OUT.json with every run's rate."""
from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from hvd_dqn.flags import split_run_flags  # noqa: E402
from hvd_dqn.run.horovod_setup import launcher_environment  # noqa: E402


def measured_rate(metrics_csv: str) -> float:
    """Env steps per second between the first log point by which updates had begun and the last one."""
    with open(metrics_csv) as handle:
        timed = [(int(row["env_steps"]), float(row["wall_time_s"])) for row in csv.DictReader(handle)
                 if row.get("wall_time_s") and int(row["updates"]) > 0]
    if len(timed) < 2:
        raise SystemExit(f"{metrics_csv}: fewer than two log points after the first update; raise --env_steps")
    (steps_a, wall_a), (steps_b, wall_b) = timed[0], timed[-1]
    return (steps_b - steps_a) / (wall_b - wall_a)


def train(ranks: int, controller: str, cycle_ms: str, args, extra, logdir: str) -> float:
    command = [os.path.join(os.path.dirname(sys.executable), "horovodrun"), "-np", str(ranks),
               "-H", f"localhost:{ranks}", f"--{controller}", sys.executable, "-m", "hvd_dqn.train",
               f"--flagfile={args.flagfile}", f"--logdir={logdir}", f"--total_env_steps={args.env_steps}",
               "--eval_interval_env_steps=0", "--checkpoint_interval_env_steps=0", "--stop_at_train_return=inf",
               f"--log_interval_env_steps={args.env_steps // 12}", *extra]
    environment = dict(launcher_environment(), HOROVOD_CYCLE_TIME=cycle_ms)
    with open(logdir + ".log", "w") as log:
        status = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=environment).returncode
    if status != 0:
        raise SystemExit(f"ranks {ranks}, {controller}, cycle {cycle_ms} ms: exit status {status}; see {logdir}.log")
    return measured_rate(os.path.join(logdir, "metrics.csv"))


def main() -> int:
    argv, extra = split_run_flags(sys.argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flagfile", required=True)
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--cycles_ms", default="0,1,5", help="HOROVOD_CYCLE_TIME values, comma-separated.")
    parser.add_argument("--controllers", default="gloo,mpi")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--env_steps", type=int, default=10000)
    parser.add_argument("--out", required=True, help="Writes OUT.json.")
    args = parser.parse_args(argv)
    configurations = list(itertools.product(args.controllers.split(","), args.cycles_ms.split(",")))
    runs = []
    with tempfile.TemporaryDirectory() as workdir:
        for round_index in range(args.rounds):
            for controller, cycle_ms in (configurations if round_index % 2 == 0 else configurations[::-1]):
                logdir = os.path.join(workdir, f"{controller}_{cycle_ms}_{round_index}")
                rate = train(args.ranks, controller, cycle_ms, args, extra, logdir)
                runs.append(dict(round=round_index, controller=controller, cycle_ms=cycle_ms, env_steps_per_s=rate))
                print(f"round {round_index}: {controller}, cycle {cycle_ms} ms: {rate:.1f} env steps/s", flush=True)
    summary = [dict(controller=controller, cycle_ms=cycle_ms,
                    median_env_steps_per_s=statistics.median(run["env_steps_per_s"] for run in runs
                                                             if (run["controller"], run["cycle_ms"]) ==
                                                             (controller, cycle_ms)))
               for controller, cycle_ms in configurations]
    result = dict(flagfile=args.flagfile, extra_flags=extra, ranks=args.ranks, cores=len(os.sched_getaffinity(0)),
                  env_steps=args.env_steps, timed_from="the first log point after the first update", runs=runs, summary=summary)
    with open(args.out + ".json", "w") as handle:
        json.dump(result, handle, indent=2)
        handle.write("\n")
    for row in summary:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
