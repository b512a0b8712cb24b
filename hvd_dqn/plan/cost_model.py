"""How fast N workers train, predicted from measured stage costs, and checked against measured runs:

    python -m hvd_dqn.plan.cost_model --flagfile=configs/cartpole.flags --workers=1,2 --validate \\
        [--study=results/time_to_score/cartpole_2_workers.json] [--json=model.json] [-- more train flags]
    python -m hvd_dqn.plan.cost_model --flagfile=configs/breakout_dopamine.flags --paper   # GPUs, on paper

On this machine (every worker bound to one core, as the worker benchmark and the time studies run) it measures
the model's three costs (hvd_dqn/plan/cost_formula.py): t_act(e) and t_learn(b) for the shapes each worker
count gives a rank, in a process bound to one core, and t_sync(N), what the gradient exchange across N ranks
adds to the trainer's own update, under horovodrun (`hvd_dqn.measure.benchmark --exchange_batch_size`); t_learn is
then scaled to the update as the trainer makes it, from one one-worker training run (`calibrate_learning`).
From them it predicts the job's env steps per second for each worker count. With --validate it then trains the
preset with 1 and N workers in alternating rounds (`hvd_dqn.measure.benchmark_workers`'s runs) and reports each
prediction's error; with --study, a time study's JSON, it predicts the seconds to the study's target from the
env steps each worker count took there and sets them beside the measured ones. With --paper it prints the same
formula's figures for GPU nodes and clusters from a hardware profile instead (--profile: a built-in one such as
h200-16core, or the file `python -m hvd_dqn.plan.calibrate` writes on the user's machine), every figure with its
source, beside the profile's own measured loops and the model's error on them. A profile times one update and
says whose (the built-in ones plain DQN's, a calibrated one its preset's); another preset's update is that one with
the arithmetic it does beyond it (--update_cost_ratio, or else timed here against it on one core) at the full
device's cost per sample.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from types import SimpleNamespace

from hvd_dqn.rank_split import learns_from_replay
from hvd_dqn.measure.benchmark_workers import (BenchmarkError, command_for, parse_workers, resolved_config, run_once,
                                               summarise, write_report)
from hvd_dqn.rank_split import counts_are_per_rank, problem_with_runs
from hvd_dqn.plan import cost_formula, gpu_paper, hardware_profiles
from hvd_dqn.measure.allreduce import MIXED_PRECISION_UNMEASURABLE
from hvd_dqn.run import horovod_setup

PROGRAM = "hvd_dqn.plan.cost_model"
PAPER_ENV_STEPS = 50_000_000  # Dopamine's and the Nature paper's budget: 200M frames = 50M agent steps


def job_num_envs(config, workers: int, given) -> int:
    """The envs of the whole job at `workers` workers: --job_num_envs when given; otherwise --num_envs counts
    the job's, or each rank's with --counts_per_rank."""
    if given:
        return given
    return config.num_envs * workers if counts_are_per_rank(config) else config.num_envs


def shapes_for(config, workers_list, given_job_envs):
    try:
        return {workers: cost_formula.rank_shape(config.rank_scaling, job_num_envs(config, workers, given_job_envs),
                                               config.batch_size, config.train_frequency, workers)
                for workers in workers_list}
    except cost_formula.ShapeError as error:
        raise BenchmarkError(str(error)) from None


def measure_costs(args, config, shapes, train_flags) -> dict:
    """t_act and t_learn in a child process bound to one core (binding this process would bind every run it
    starts after), t_sync(N) (and the bare allreduce beside it) under horovodrun for each N > 1."""
    python = sys.executable
    one_worker = cost_formula.rank_shape(config.rank_scaling, job_num_envs(config, 1, args.job_num_envs),
                                       config.batch_size, config.train_frequency, 1)
    with tempfile.TemporaryDirectory(prefix="hvd_dqn_cost_model_") as folder:
        costs_json = os.path.join(folder, "costs.json")
        envs = sorted({shape.num_envs for shape in [one_worker, *shapes.values()]})
        batches = sorted({shape.batch_size for shape in [one_worker, *shapes.values()]})
        command = [python, "-m", PROGRAM, "--part=costs", f"--flagfile={args.flagfile}",
                   f"--envs={','.join(map(str, envs))}", f"--batches={','.join(map(str, batches))}",
                   f"--round_seconds={args.round_seconds}", f"--rounds={args.rounds}", f"--json={costs_json}",
                   "--", *train_flags]
        _run(command, "measuring t_act and t_learn")
        with open(costs_json) as handle:
            costs = json.load(handle)
        # The acting path alone leaves out the trainer's own work per iteration (episode and metric
        # bookkeeping, the stop poll, the loop): t_act is read from the trainer acting alone, a one-worker run
        # whose memory never reaches --learning_starts; the stage figure stays in the report beside it.
        costs["act_stage_s"] = costs.pop("act_s")
        costs["act_s"] = {str(num_envs): 1.0 / acting_only_rate(args, config, num_envs, train_flags, folder)
                          for num_envs in envs}
        calibrate_learning(args, config, one_worker, costs, train_flags, folder)
        costs["sync_s"], costs["sync_bare_s"] = {"1": 0.0}, {"1": 0.0}
        for workers, shape in sorted(shapes.items()):
            if workers == 1:
                continue
            # t_sync is what the exchange adds to the trainer's own update, timed with the rank's acting as busy
            # work before each update. The bare allreduce, timed after as much busy work as a whole update, stays
            # in the report beside it: it misses the exchange's cost inside the update (TensorFlow's op, Horovod's
            # thread competing with the update for the core): with it, MinAtar's 2 workers were predicted 21% high.
            acting_ms = 1000 * shape.env_steps_per_update * costs["act_s"][str(shape.num_envs)]
            busy_ms = acting_ms + 1000 * costs["learn_s"][str(shape.batch_size)]
            sync_json = os.path.join(folder, f"sync{workers}.json")
            horovodrun = os.path.join(os.path.dirname(python), "horovodrun")
            _run([horovodrun, "-np", str(workers), f"--{args.controller}", python, "-m", "hvd_dqn.measure.benchmark",
                  f"--flagfile={args.flagfile}", *train_flags, "--cores_per_rank=1",
                  f"--allreduce_busy_ms={busy_ms:.4f}", f"--exchange_batch_size={shape.batch_size}",
                  f"--exchange_acting_ms={acting_ms:.4f}", f"--round_seconds={args.round_seconds}",
                  f"--rounds={args.rounds}", f"--json={sync_json}"],
                 f"measuring the gradient exchange across {workers} workers")
            with open(sync_json) as handle:
                measured = json.load(handle)
            costs["sync_s"][str(workers)], note = exchange_cost_s(measured)
            costs["sync_bare_s"][str(workers)] = measured["allreduce_ms_per_update"] / 1000.0
            if note:
                costs.setdefault("sync_notes", {})[str(workers)] = note
                print(f"[{PROGRAM}] {workers} workers: {note}")
    return costs


def exchange_cost_s(measured: dict) -> tuple:
    """t_sync in seconds from one exchange measurement, and a note where it was not taken as measured. The exchange
    inside the update holds the bare allreduce of the same tensors and more, so it cannot cost less: where the
    median of the paired block differences comes out below the bare allreduce (a small network's exchange, a
    fraction of a millisecond, under the drift of a few short block pairs), the bare allreduce is the better
    estimate, and the report says so."""
    exchange_ms, bare_ms = measured["exchange_in_update_ms"], measured["allreduce_ms_per_update"]
    if exchange_ms >= bare_ms:
        return exchange_ms / 1000.0, None
    return bare_ms / 1000.0, (f"the exchange inside the update measured {exchange_ms:.4f} ms, below the bare "
                              f"allreduce's {bare_ms:.4f} ms that it contains, over {measured['exchange_block_pairs']}"
                              " block pairs: t_sync is the bare allreduce's figure (more --rounds or "
                              "--round_seconds resolve it)")


def benchmark_runs_args(args, workdir: str) -> SimpleNamespace:
    """What `hvd_dqn.measure.benchmark_workers.run_once` reads from its arguments, for this command's training runs (the
    calibration and the validation): every worker bound to one core, 5 log points in the timed env steps."""
    return SimpleNamespace(workdir=workdir, measure_env_steps=args.measure_env_steps, log_points=5,
                           job_num_envs=args.job_num_envs, cores_per_rank=1, controller=args.controller,
                           flagfile=args.flagfile)


def calibrate_learning(args, config, one_worker, costs: dict, train_flags, folder: str) -> None:
    """Scales the stage's t_learn to the update as the trainer makes it. The stage times the learner's step on a
    memory of its own; the trainer adds what surrounds it (the minibatch thread, the metrics, the target
    copies, the full-size memory), which made every one-worker prediction about 16% fast. One one-worker run of
    the preset gives the trainer's seconds per update; less its acting, over the stage's figure at the same
    batch, that is the factor on t_learn at every batch. The one-worker prediction then repeats this run (its
    validation checks repeatability); the other worker counts are predicted."""
    runs_args = benchmark_runs_args(args, os.path.join(folder, "calibration"))
    run = run_once(1, 0, runs_args, config, train_flags)
    trainer_learn_s = (1.0 / run["updates_per_s"]
                       - one_worker.env_steps_per_update * costs["act_s"][str(one_worker.num_envs)])
    stage_learn_s = costs["learn_s"][str(one_worker.batch_size)]
    if trainer_learn_s <= 0:
        raise BenchmarkError(f"the one-worker calibration run made {run['updates_per_s']:,.1f} updates/s, faster "
                             "than its acting alone allows; the machine's speed changed under the measurement")
    costs["learn_scale"] = trainer_learn_s / stage_learn_s
    costs["learn_stage_s"] = costs.pop("learn_s")
    costs["learn_s"] = {batch: value * costs["learn_scale"] for batch, value in costs["learn_stage_s"].items()}
    costs["calibration_run"] = {key: run[key] for key in ("env_steps_per_s", "updates_per_s", "measured_env_steps")}


def acting_only_rate(args, config, num_envs: int, train_flags, folder: str) -> float:
    """Env steps per second of the trainer with `num_envs` envs and no updates (its memory never reaches
    --learning_starts), one worker bound to one core, from its metrics.csv."""
    total = 8 * max(1000, args.measure_env_steps // 8)
    if config.replay_capacity <= total:
        raise BenchmarkError(f"--replay_capacity={config.replay_capacity}: the acting-only run needs more than "
                             f"{total:,} transitions of room; lower --measure_env_steps")
    logdir = os.path.join(folder, f"acting{num_envs}")
    runs_args = SimpleNamespace(cores_per_rank=1, controller=args.controller, flagfile=args.flagfile)
    command = command_for(1, runs_args, logdir, total, total // 8,
                          [*train_flags, f"--num_envs={num_envs}", f"--learning_starts={config.replay_capacity}"])
    _run(command, f"the acting-only run with {num_envs} envs")
    with open(os.path.join(logdir, "metrics.csv"), newline="") as handle:
        rows = list(csv.DictReader(handle))[1:]  # from the second log point: start-up left out
    seconds = float(rows[-1]["wall_time_s"]) - float(rows[0]["wall_time_s"])
    return (int(rows[-1]["env_steps"]) - int(rows[0]["env_steps"])) / seconds


def _run(command, what: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True, env=horovod_setup.launcher_environment())
    if result.returncode != 0:
        raise BenchmarkError(f"{what} failed (status {result.returncode}): "
                             f"{(result.stderr or result.stdout).strip().splitlines()[-1:]}")


def predictions(shapes, costs) -> dict:
    predicted = {}
    for workers, shape in shapes.items():
        act = costs["act_s"][str(shape.num_envs)]
        learn = costs["learn_s"][str(shape.batch_size)]
        sync = costs["sync_s"][str(workers)]
        predicted[workers] = dict(
            num_envs_per_rank=shape.num_envs, batch_per_rank=shape.batch_size,
            env_steps_per_update_per_rank=shape.env_steps_per_update,
            act_ms=round(1000 * act, 4), act_stage_ms=round(1000 * costs["act_stage_s"][str(shape.num_envs)], 4),
            learn_ms=round(1000 * learn, 4),
            learn_stage_ms=round(1000 * costs["learn_stage_s"][str(shape.batch_size)], 4),
            sync_ms=round(1000 * sync, 4), sync_bare_ms=round(1000 * costs["sync_bare_s"][str(workers)], 4),
            predicted_env_steps_per_s=round(cost_formula.job_env_steps_per_s(shape, act, learn, sync), 1))
    return predicted


def validate(args, config, workers_list, train_flags, predicted) -> dict:
    """The preset trained by each worker count in alternating rounds; each prediction's error."""
    runs_args = benchmark_runs_args(args, args.workdir or tempfile.mkdtemp(prefix="hvd_dqn_cost_model_runs_"))
    runs = []
    for round_index in range(args.validate_rounds):
        for workers in workers_list:
            run = run_once(workers, round_index, runs_args, config, train_flags)
            runs.append(run)
            print(f"[{PROGRAM}] round {round_index + 1}, {workers} worker(s): {run['env_steps_per_s']:,.0f} env "
                  f"steps/s (predicted {predicted[workers]['predicted_env_steps_per_s']:,.0f})", flush=True)
    measured = summarise(runs, workers_list)
    for workers in workers_list:
        row = predicted[workers]
        row["measured_env_steps_per_s"] = measured[f"env_steps_per_s_{workers}"]
        row["error"] = round(cost_formula.prediction_error(row["predicted_env_steps_per_s"],
                                                         row["measured_env_steps_per_s"]), 3)
    return {"validation_runs": [{key: value for key, value in run.items() if key != "logdir"} for run in runs]}


def load_study(study_path: str) -> dict:
    try:
        with open(study_path) as handle:
            study = json.load(handle)
    except (OSError, ValueError) as error:
        raise BenchmarkError(f"--study={study_path}: cannot read it ({error})") from None
    if not isinstance(study, dict) or not isinstance(study.get("runs"), list):
        raise BenchmarkError(f"--study={study_path}: not a time study's JSON (it has no list of runs)")
    return study


def against_study(study: dict, predicted) -> None:
    """Seconds to the study's target: its median env steps to the target at each worker count over the
    predicted rate, beside its median measured seconds of training."""
    for workers, row in predicted.items():
        runs = [run for run in study.get("runs", []) if run.get("ranks") == workers]
        steps = cost_formula.median_of([run.get("env_steps_to_target") for run in runs])
        seconds = cost_formula.median_of([run.get("wall_s_to_target") for run in runs])
        if steps is None:
            continue
        row["study_env_steps_to_target"] = steps
        row["predicted_s_to_target"] = round(steps / row["predicted_env_steps_per_s"], 1)
        if seconds is not None:
            row["measured_s_to_target"] = round(seconds, 1)
            row["time_error"] = round(cost_formula.prediction_error(row["predicted_s_to_target"], seconds), 3)


def print_predictions(predicted) -> None:
    for workers, row in sorted(predicted.items()):
        line = (f"  {workers} worker(s): e={row['num_envs_per_rank']} b={row['batch_per_rank']} "
                f"F_r={row['env_steps_per_update_per_rank']:g}  t_act {row['act_ms']:.3f} ms (acting path alone "
                f"{row['act_stage_ms']:.3f})  t_learn "
                f"{row['learn_ms']:.3f} ms (the stage {row['learn_stage_ms']:.3f})  t_sync {row['sync_ms']:.3f} ms "
                f"(the allreduce alone {row['sync_bare_ms']:.3f})  predicted "
                f"{row['predicted_env_steps_per_s']:,.0f} env steps/s")
        if "measured_env_steps_per_s" in row:
            line += f", measured {row['measured_env_steps_per_s']:,.0f} ({100 * row['error']:+.1f}%)"
        if "predicted_s_to_target" in row:
            line += f"; to the study's target {row['predicted_s_to_target']:,.1f} s predicted"
            if "measured_s_to_target" in row:
                line += f", {row['measured_s_to_target']:,.1f} s measured ({100 * row['time_error']:+.1f}%)"
        print(line)


def costs_part(args, train_flags) -> None:
    """The child process of measure_costs: bound to one core, one thread each way, as a worker of the runs."""
    from hvd_dqn.measure.stages import cost_model_costs

    config = resolved_config(args.flagfile, train_flags)
    horovod_setup.init_horovod(intra_op_threads=1, inter_op_threads=1, cores_per_rank=1)
    costs = cost_model_costs(config, parse_workers(args.envs), parse_workers(args.batches), args.round_seconds,
                             args.rounds)
    with open(args.json, "w") as handle:
        json.dump({name: {str(key): value for key, value in values.items()} for name, values in costs.items()},
                  handle)


def main(argv=None) -> int:
    from hvd_dqn.flags import split_run_flags

    argv, train_flags = split_run_flags(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("--flagfile", required=True, help="The preset the model is for.")
    parser.add_argument("--workers", default="1,2", help="Worker counts to predict (and validate), comma-separated.")
    parser.add_argument("--job_num_envs", type=int, default=None,
                        help="With --counts_per_rank: the envs of the whole job, split over the workers.")
    parser.add_argument("--controller", choices=("gloo", "mpi"), default="mpi", help="horovodrun's controller.")
    parser.add_argument("--round_seconds", type=float, default=3.0, help="Seconds per cost measurement round.")
    parser.add_argument("--rounds", type=int, default=3, help="Alternating rounds per cost; medians are used.")
    parser.add_argument("--validate", action="store_true", help="Also train each worker count and compare.")
    parser.add_argument("--validate_rounds", type=int, default=2, help="Alternating rounds of validation runs.")
    parser.add_argument("--measure_env_steps", type=int, default=10000, help="Env steps timed per validation run.")
    parser.add_argument("--study", default=None, help="A time study's JSON: predict its seconds to the target.")
    parser.add_argument("--paper", action="store_true",
                        help="GPU nodes and clusters on paper, from a hardware profile of measured parts.")
    parser.add_argument("--profile", default="h200-16core",
                        help="With --paper: a built-in hardware profile (" + ", ".join(hardware_profiles.BUILT_IN)
                             + ") or a profile file written by python -m hvd_dqn.plan.calibrate.")
    parser.add_argument("--layouts", default="1x1,1x8,4x8",
                        help="With --paper: the jobs to predict, as NODESxGPUS, starting with 1x1.")
    parser.add_argument("--envs_per_gpu", type=int, default=None,
                        help="With --paper: envs each GPU steps (default: the preset's --num_envs, per GPU).")
    parser.add_argument("--env_steps", type=int, default=PAPER_ENV_STEPS, help="With --paper: the run's length.")
    parser.add_argument("--update_cost_ratio", type=float, default=None,
                        help="With --paper, for a replay agent: how many times the arithmetic of the update the "
                             "profile timed (plain DQN's in the built-in profiles) its update does (python -m "
                             "hvd_dqn.measure.update_costs's 'vs first' against a preset of that update); by "
                             "default 1 for that update itself, else measured here on one core.")
    parser.add_argument("--env_steps_to_score", nargs=3, action="append", metavar=("RANKS", "ENV_STEPS", "SOURCE"),
                        help="With --paper, once per rank count (1 among them): the env steps a run with RANKS ranks "
                             "needed for the score and where that figure comes from (a study, or a prediction "
                             "such as hvd_dqn.plan.step_headroom's); the table then gives hours to the score.")
    parser.add_argument("--workdir", default=None, help="Folder for the validation runs (default: temporary).")
    parser.add_argument("--json", default=None, help="Writes the report here.")
    parser.add_argument("--part", choices=("all", "costs"), default="all", help=argparse.SUPPRESS)
    parser.add_argument("--envs", default="", help=argparse.SUPPRESS)
    parser.add_argument("--batches", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        if not os.path.exists(args.flagfile):
            raise BenchmarkError(f"--flagfile={args.flagfile}: no such file")
        if args.part == "costs":
            costs_part(args, train_flags)
            return 0
        config = resolved_config(args.flagfile, train_flags)
        if not learns_from_replay(config) and not args.paper:
            raise BenchmarkError("--agent=pqn: this machine's costs are measured for DQN's update (a "
                                 "replay minibatch every --train_frequency env steps); for PQN, --paper predicts "
                                 "GPUs and hvd_dqn.measure.benchmark_workers measures workers here")
        if args.update_cost_ratio is not None and not (args.paper and learns_from_replay(config)):
            raise BenchmarkError(f"--update_cost_ratio={args.update_cost_ratio:g}: only with --paper for an agent "
                                 "that learns from a replay memory (PQN's update is measured apart)")
        if args.update_cost_ratio is not None and not 0 < args.update_cost_ratio < float("inf"):
            raise BenchmarkError(f"--update_cost_ratio={args.update_cost_ratio:g}: must be a positive number (the "
                                 "agent's update over DQN's)")
        if args.envs_per_gpu is not None and args.envs_per_gpu <= 0:
            raise BenchmarkError(f"--envs_per_gpu={args.envs_per_gpu}: must be a positive number of envs")
        if args.paper:
            report = gpu_paper.paper(config, args)
            gpu_paper.print_paper(report)
        else:
            workers_list = parse_workers(args.workers)
            if args.round_seconds <= 0 or args.rounds <= 0 or args.validate_rounds <= 0 or args.measure_env_steps <= 0:
                raise BenchmarkError("--round_seconds, --rounds, --validate_rounds and --measure_env_steps must be "
                                     "positive")
            cores = len(os.sched_getaffinity(0))
            if max(workers_list) > cores:
                raise BenchmarkError(f"--workers={args.workers}: one core per worker needs {max(workers_list)} "
                                     f"cores; this machine has {cores} (--paper predicts beyond it)")
            # The runs' shared check first, so a split that does not fit is named as the other measuring
            # commands name it; rank_shape keeps its own check for --paper's layouts.
            problem = problem_with_runs(config, workers_list, f"--workers={args.workers}", args.job_num_envs,
                                        train_flags)
            if problem:
                raise BenchmarkError(problem)
            if config.mixed_precision and max(workers_list) > 1:
                raise BenchmarkError(MIXED_PRECISION_UNMEASURABLE)
            study = load_study(args.study) if args.study else None
            shapes = shapes_for(config, workers_list, args.job_num_envs)
            costs = measure_costs(args, config, shapes, train_flags)
            predicted = predictions(shapes, costs)
            report = {"flagfile": args.flagfile, "train_flags": train_flags, "rank_scaling": config.rank_scaling,
                      "controller": args.controller, "costs": costs}
            if args.validate:
                report.update(validate(args, config, workers_list, train_flags, predicted))
            if study:
                against_study(study, predicted)
                report["study"] = args.study
            report["predictions"] = {str(workers): row for workers, row in predicted.items()}
            print(f"{PROGRAM}: {args.flagfile}, --rank_scaling={config.rank_scaling}, one core per worker")
            print_predictions(predicted)
        write_report(args.json, report)
    except (BenchmarkError, OSError) as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
