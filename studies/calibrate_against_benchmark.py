"""Whether `python -m hvd_dqn.plan.calibrate`'s profile of this machine agrees with the figures of
`python -m hvd_dqn.measure.benchmark` for the same preset, both bound to the same core, taking turns (benchmark,
calibrate; then calibrate, benchmark; ...), each figure the median over the rounds:

    .venv/bin/python studies/calibrate_against_benchmark.py --flagfile=configs/pong.flags --core=0 --rounds=4 \\
        --out=results/calibrate/pong -- --replay_capacity=50000

Compared, per figure: the emulators' agent steps/s at the preset's envs; the acting path (the benchmark's
measured actor steps/s against the profile's model of it, forward pass + emulators + host costs); the update
from host memory at the preset's batch; a minibatch's draw from the replay memory (the profile's gather per byte
times the batch's bytes). The allreduce is left out: calibrate takes it from the benchmark's own measurement.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from hvd_dqn.flags import split_run_flags  # noqa: E402
from hvd_dqn.plan import gpu_costs, hardware_profiles  # noqa: E402


def run(command):
    subprocess.run(command, check=True, cwd=REPO, stdout=subprocess.DEVNULL)


def benchmark_figures(path: str) -> dict:
    with open(path) as handle:
        data = json.load(handle)
    return {"emulators": data["env_raw_steps_per_s"], "acting": data["actor_steps_per_s"],
            "update_from_host": data["learner_updates_per_s"], "replay_draw": data["replay_sample_batches_per_s"],
            "num_envs": data["num_envs"], "batch_size": data["batch_size"]}


def calibrate_figures(path: str, num_envs: int, batch_size: int, observation_bytes: int) -> dict:
    profile = hardware_profiles.load_profile(path)
    return {"emulators": profile.emulator_steps_per_s[num_envs],
            "acting": 1000.0 * num_envs / gpu_costs.acting_ms(profile, num_envs),
            "update_from_host": 1000.0 / profile.update_host_ms[batch_size],
            "replay_draw": 1000.0 / gpu_costs.gather_ms(profile, 2 * batch_size * observation_bytes)}


def main() -> None:
    argv, train_flags = split_run_flags(sys.argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flagfile", required=True)
    parser.add_argument("--core", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--round_seconds", type=float, default=3.0)
    parser.add_argument("--observation_bytes", type=int, default=84 * 84 * 4)
    parser.add_argument("--out", required=True, help="Prefix of the study's files (.json, and each run's own).")
    args = parser.parse_args(argv)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    pin = ["taskset", "-c", str(args.core), sys.executable, "-m"]
    timing = [f"--round_seconds={args.round_seconds}", "--rounds=3"]
    measured = {"benchmark": [], "calibrate": []}
    for round_index in range(args.rounds):
        order = ["benchmark", "calibrate"] if round_index % 2 == 0 else ["calibrate", "benchmark"]
        for tool in order:
            path = f"{args.out}_{tool}_{round_index}.json"
            if tool == "benchmark":
                run(pin + ["hvd_dqn.measure.benchmark", f"--flagfile={args.flagfile}", "--part=stages", *timing,
                           "--cores_per_rank=1", f"--json={path}", *train_flags])
                measured[tool].append(benchmark_figures(path))
            else:
                run(pin + ["hvd_dqn.plan.calibrate", f"--flagfile={args.flagfile}", f"--out={path}", "--ranks=1",
                           *timing, "--", "--cores_per_rank=1", *train_flags])
                measured[tool].append(path)
            print(f"round {round_index + 1}: {tool} done", flush=True)
    shape = measured["benchmark"][0]
    calibrated = [calibrate_figures(path, shape["num_envs"], shape["batch_size"], args.observation_bytes)
                  for path in measured["calibrate"]]
    rows = []
    for figure in ("emulators", "acting", "update_from_host", "replay_draw"):
        bench = statistics.median(run_figures[figure] for run_figures in measured["benchmark"])
        calib = statistics.median(run_figures[figure] for run_figures in calibrated)
        rows.append({"figure": figure, "benchmark": round(bench, 2), "calibrate": round(calib, 2),
                     "ratio": round(calib / bench, 3)})
        print(f"{figure:<18} benchmark {bench:>10,.2f}  calibrate {calib:>10,.2f}  ratio {calib / bench:.3f}")
    with open(f"{args.out}.json", "w") as handle:
        json.dump({"flagfile": args.flagfile, "train_flags": train_flags, "core": args.core, "rounds": args.rounds,
                   "num_envs": shape["num_envs"], "batch_size": shape["batch_size"], "rows": rows}, handle, indent=2)
        handle.write("\n")


if __name__ == "__main__":
    main()
