"""Which TensorFlow and emulator thread counts make one training process fastest on this machine.

    .venv/bin/python studies/thread_sweep.py --flagfile=configs/breakout_dopamine.flags \\
        --settings=2/2/1,2/1/1,1/1/1,2/2/2 --rounds=2 --json=threads.json

Each setting is INTRA/ENV/INTER: --intra_op_threads, --env_threads, --inter_op_threads (0 means the
trainer's default: this host's cores divided by its ranks). TensorFlow fixes its thread pools when it
starts, so every setting is a short real training run of its own (one process, no launcher), in the
update-bound phase: learning starts after --learning_starts env steps and the rest of the run is timed.
The settings take turns, round after round (A, B, C, A, B, C, ...), so a machine whose load changes
affects all alike; each setting reports the median over its rounds of its metrics rows' env steps/s.
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile

PROGRAM = "studies/thread_sweep.py"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_settings(text: str):
    settings = []
    for part in text.split(","):
        try:
            intra, env, inter = (int(value) for value in part.split("/"))
        except ValueError:
            raise ValueError(f"--settings={text}: each setting is INTRA/ENV/INTER, e.g. 2/2/1") from None
        if min(intra, env) < 0 or inter < 1:
            raise ValueError(f"--settings={text}: INTRA and ENV must be >= 0, INTER >= 1")
        settings.append((intra, env, inter))
    return settings


def timed_run(flagfile: str, setting, args, logdir: str) -> float:
    intra, env, inter = setting
    command = [sys.executable, "-m", "hvd_dqn.train", f"--flagfile={flagfile}",
               f"--logdir={logdir}", f"--intra_op_threads={intra}", f"--env_threads={env}",
               f"--inter_op_threads={inter}", f"--learning_starts={args.learning_starts}",
               f"--replay_capacity={max(args.learning_starts, 20_000)}",
               f"--total_env_steps={args.learning_starts + args.timed_env_steps}",
               f"--log_interval_env_steps={args.timed_env_steps // 4}", "--eval_interval_env_steps=0",
               "--checkpoint_interval_env_steps=0"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    if result.returncode != 0:
        tail = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"setting {setting}: hvd_dqn.train exited with {result.returncode}: {tail}")
    with open(os.path.join(logdir, "metrics.csv"), newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if int(row["env_steps"]) > args.learning_starts]
    # The first row after the start still contains the filling phase's fast steps: leave it out.
    return statistics.median(float(row["env_steps_per_second"]) for row in rows[1:] or rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("--flagfile", required=True)
    parser.add_argument("--settings", default="0/0/1,2/1/1,1/1/1,2/2/2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--learning_starts", type=int, default=1000)
    parser.add_argument("--timed_env_steps", type=int, default=8000)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    try:
        settings = parse_settings(args.settings)
        if not os.path.exists(args.flagfile):
            raise ValueError(f"--flagfile={args.flagfile}: no such file")
        if args.rounds <= 0 or args.timed_env_steps < 4 or args.learning_starts <= 0:
            raise ValueError("--rounds, --learning_starts and --timed_env_steps must be positive")
        rates = {setting: [] for setting in settings}
        with tempfile.TemporaryDirectory(prefix="thread_sweep_") as scratch:
            for round_index in range(args.rounds):
                for setting in settings:
                    logdir = os.path.join(scratch, f"r{round_index}_" + "_".join(map(str, setting)))
                    rates[setting].append(timed_run(os.path.abspath(args.flagfile), setting, args, logdir))
                    print(f"[{PROGRAM}] round {round_index + 1}, intra/env/inter {setting}: "
                          f"{rates[setting][-1]:.1f} env steps/s", flush=True)
    except (ValueError, RuntimeError, OSError) as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 2
    table = [dict(intra_op_threads=intra, env_threads=env, inter_op_threads=inter,
                  median_env_steps_per_s=round(statistics.median(values), 1), rounds=[round(v, 1) for v in values])
             for (intra, env, inter), values in rates.items()]
    best = max(table, key=lambda row: row["median_env_steps_per_s"])
    result = dict(flagfile=args.flagfile, cores=os.cpu_count(), settings=table, best=best)
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2)
            handle.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
