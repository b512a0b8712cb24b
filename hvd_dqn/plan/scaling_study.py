"""Sample efficiency against the number of ranks: trains a preset with each rank count and seed, then reports
how many env steps each run needed to reach a target return, and the return at a fixed budget.

    .venv/bin/python -m hvd_dqn.plan.scaling_study --flagfile=configs/cartpole.flags --ranks=1,2,4,8 \
        --seeds=0,1,2,3,4 --target=475 --budget_env_steps=100000 --workdir=runs/scaling_cartpole \
        --out=results/scaling/cartpole
    ... -- --learning_rate=0.0005          # flags after "--" go to every run of hvd_dqn.train
    ... --job_num_envs=8 -- --counts_per_rank    # per-rank counts, 8 envs in every job: --num_envs=8/ranks

"Reached the target" means what gymnasium means by solving CartPole-v1: the mean return of --window (100)
consecutive training episodes, as they were played (ordered by the env step at which they ended, over all
ranks), is at least --target. The env steps to target are those at the end of the window's last episode.
The return at the budget is the mean of the last --window training episodes of the run. Evaluation during
training and the preset's --stop_at_train_return are switched off, so no run stops early and every run is
measured at the same budget; or, with --stop_at_target, each run ends once it has reached the target, which
leaves its env steps to the target as they were and saves the rest of its budget (the long runs of many ranks
sharing a few cores), at the cost of the return at the budget.

Each finished run's evidence (episodes.csv, metrics.csv, config.json and run.json with its flags, wall time and the
commit each part was trained with) is copied to OUT_runs/np<ranks>_seed<seed>/, beside the results, so anyone can
recompute the study from the raw episodes. Runs whose evidence is already there (made with the same preset flags,
comments aside, and the same flags after --), or that finished in --workdir (a final checkpoint at the budget), are
not trained again: a study can be stopped and continued, later or on another machine, from what the
repository holds. A run stopped part-way (SIGTERM or Ctrl-C to the study, passed on to its ranks; or a signal to
horovodrun or the ranks themselves, which the study reports and does not take for finished) keeps a checkpoint with
its replay memories and, when the study is started again, continues from it (--resume --checkpoint_replay). With
CartPole or MinAtar, whose emulators the checkpoint holds too, the continued run is the run that never stopped;
Atari's emulators cannot be saved, so the episodes under way at the stop never end in episodes.csv. run.json counts
the parts; the wall time adds them up. Ranks beyond the cores oversubscribe them: env steps, not wall time, are
compared, unless the study runs in time mode (--cores_per_rank=K): then every rank of every run, the one-rank
baseline included, is bound to K cores of its own, and each record also
gives wall_s_to_target, the seconds of training at which the target was reached (episodes.csv's wall_s, continued
across a run's parts). Runs go seed by seed, each rank count in turn, in an order that turns round from one seed to
the next (1, 2; 2, 1; 1, 2), so that the machine's drift over a study falls on every rank count alike.
Writes OUT.json (one record per run plus a summary per rank count) and OUT.png."""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

from hvd_dqn.plan.study_report import StudyError, draw, summarise
from hvd_dqn.plan.study_runs import (PROGRAM, REPO, finished_env_steps, keep_evidence, kept_evidence,
                                     refuse_a_stop_below_the_target,
                                     preset_flags_digest, recorded_commits, recorded_wall, run_finished, run_lock,
                                     train_or_continue)
from hvd_dqn.rank_split import problem_with_runs
from hvd_dqn.reports.score import ScoreError, env_steps_to_target, final_return, read_run, wall_s_to_target

# Said in the output of a study whose ranks are not bound to cores of their own (--cores_per_rank=0).
UNBOUND_NOTE = ("unbound ranks (--cores_per_rank=0): they share the machine's cores with each other and anything else "
                "running, so compare env steps only; the seconds of training are no speed figure")


def parse_int_list(text: str, name: str):
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise StudyError(f"--{name}={text}: must be a comma-separated list of integers") from None
    if not values or any(value < 0 for value in values) or (name == "ranks" and 0 in values):
        raise StudyError(f"--{name}={text}: must list {'positive' if name == 'ranks' else 'non-negative'} integers")
    return values


def resolved_config(flagfile: str, run_flags):
    """The TrainConfig the runs train with (the preset, then the flags after "--"), checked before any run
    trains: a bad flag is a StudyError naming it, not a failed run."""
    from hvd_dqn.config import ConfigError
    from hvd_dqn.flags import config_of_runs

    try:
        return config_of_runs(PROGRAM, flagfile, run_flags)
    except ConfigError as error:
        raise StudyError(f"the runs' flags: {error}") from None


def main(argv=None) -> int:
    from hvd_dqn.flags import split_run_flags

    argv, extra = split_run_flags(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("--flagfile", required=True, help="The preset every run trains with.")
    parser.add_argument("--ranks", default="1,2,4,8", help="Rank counts, comma-separated.")
    parser.add_argument("--seeds", default="0,1,2,3,4", help="Seeds, comma-separated.")
    parser.add_argument("--target", type=float, required=True, help="Return that counts as reached (CartPole: 475).")
    parser.add_argument("--window", type=int, default=100, help="Consecutive training episodes averaged (100).")
    parser.add_argument("--budget_env_steps", type=int, required=True, help="Env steps of every run (over ranks).")
    parser.add_argument("--workdir", required=True, help="Folder for the runs' logdirs (outside git).")
    parser.add_argument("--out", required=True, help="Writes OUT.json and OUT.png.")
    parser.add_argument("--job_num_envs", type=int, default=None,
                        help="Envs of the whole job, the same for every rank count: each run gets --num_envs="
                             "JOB_NUM_ENVS/ranks (only with --counts_per_rank, whose --num_envs counts per rank; "
                             "otherwise the preset's --num_envs is the job's already).")
    parser.add_argument("--cores_per_rank", type=int, default=0,
                        help="Time mode: every rank of every run, the one-rank baseline included, bound to this "
                             "many cores of its own (hvd_dqn.train --cores_per_rank), so that wall time to the "
                             "target compares worker for worker; rank counts this machine has no cores for are "
                             "refused. 0: unbound (ranks beyond the cores share them; compare env steps only).")
    parser.add_argument("--controller", choices=("gloo", "mpi"), default="mpi",
                        help="horovodrun's controller for the runs (the same run either way, bit for bit). MPI "
                             "is the default: on one host it exchanges through shared memory, Gloo through "
                             "loopback TCP, and with more ranks than cores MPI ran 1.7-1.9x Gloo's env steps/s "
                             "(results/throughput/oversubscribed_cartpole_16.json).")
    parser.add_argument("--stop_at_target", action="store_true",
                        help="End each run once it has reached the target (the runs' own --stop_at_train_return, "
                             "at their first log point at or after the crossing) instead of at the budget: the env "
                             "steps to the target are the same, every solved run saves the rest of its budget, and "
                             "the return at the budget is not measured (final_return is the return at the stop).")
    parser.add_argument("--evidence", default=None,
                        help="Folder of the runs' kept evidence (np<ranks>_seed<seed>/); default OUT_runs. With "
                             "--report_only another target can be read from the runs of another study: a run that "
                             "stopped at a target stopped after every lower one.")
    parser.add_argument("--report_only", action="store_true",
                        help="Train nothing: report the runs whose evidence is kept, list the others as missing.")
    args = parser.parse_args(argv)
    try:
        ranks_list, seeds = parse_int_list(args.ranks, "ranks"), parse_int_list(args.seeds, "seeds")
        if not os.path.exists(args.flagfile):
            raise StudyError(f"--flagfile={args.flagfile}: no such file")
        if args.window <= 0 or args.budget_env_steps <= 0:
            raise StudyError("--window and --budget_env_steps must be positive")
        config = resolved_config(args.flagfile, extra)
        if args.cores_per_rank < 0:
            raise StudyError(f"--cores_per_rank={args.cores_per_rank}: must be an integer >= 0")
        if any(flag.startswith("--cores_per_rank") for flag in extra):
            raise StudyError("--cores_per_rank: give it to the study (before --), which records it with every run")
        cores_here = len(os.sched_getaffinity(0))
        if args.cores_per_rank and max(ranks_list) * args.cores_per_rank > cores_here:
            raise StudyError(f"--cores_per_rank={args.cores_per_rank}: {max(ranks_list)} ranks need "
                             f"{max(ranks_list) * args.cores_per_rank} cores and this machine has {cores_here}; "
                             "wall time compares worker for worker only with a core (or more) for each")
        problem = problem_with_runs(config, ranks_list, f"--ranks={args.ranks}", args.job_num_envs, extra)
        if problem:
            raise StudyError(problem)
        out_folder = os.path.dirname(os.path.abspath(args.out))
        if not os.path.isdir(out_folder):
            raise StudyError(f"--out={args.out}: folder {out_folder} does not exist")
        args.flagfile = os.path.abspath(args.flagfile)
        records, missing, task = [], [], None
        evidence_root = args.evidence or args.out + "_runs"
        remedy = "another --evidence" if args.evidence else "another --out"  # where other evidence is read from
        with open(args.flagfile, "rb") as handle:  # evidence is tied to the preset's content, not only its name
            preset = handle.read()
        # Seed by seed, each rank count in turn, so that a drift in this machine's speed during the study falls on
        # every rank count alike and not on the ones trained last (five 2-worker CartPole runs trained after the
        # five 1-worker runs once slowed from 1,676 to 1,336 env steps/s, where reruns went at 1,589-1,703). The
        # order of the rank counts turns round from one seed to the next, so that a drift within the study does
        # not always favour the rank count trained second in each seed (one worker's rate once rose from 537 to
        # 617 env steps/s over a study that always trained it first). The records are listed rank count by rank
        # count all the same.
        for turn, seed in enumerate(seeds):
            for ranks in (ranks_list if turn % 2 == 0 else ranks_list[::-1]):
                name = f"np{ranks}_seed{seed}"
                logdir = os.path.abspath(os.path.join(args.workdir, name))
                evidence = os.path.join(evidence_root, name)
                provenance = dict(flagfile=os.path.relpath(args.flagfile, REPO),
                                  flagfile_sha256=hashlib.sha256(preset).hexdigest()[:16],
                                  preset_flags_sha256=preset_flags_digest(preset),
                                  extra_flags=extra, job_num_envs=args.job_num_envs,
                                  cores_per_rank=args.cores_per_rank,
                                  budget_env_steps=args.budget_env_steps, stop_at_target=args.stop_at_target,
                                  ranks=ranks, seed=seed)
                run_flags = extra + ([] if args.job_num_envs is None else [f"--num_envs={args.job_num_envs // ranks}"])
                run_flags += [f"--cores_per_rank={args.cores_per_rank}"] if args.cores_per_rank else []
                kept = kept_evidence(evidence, provenance, remedy)
                if kept is not None and args.stop_at_target:
                    refuse_a_stop_below_the_target(evidence, args.target, args.window, remedy)
                if kept is None and args.report_only:
                    missing.append(dict(ranks=ranks, seed=seed))
                    continue
                if kept is None:
                    with run_lock(logdir):
                        wall = recorded_wall(logdir)
                        done = finished_env_steps(logdir)
                        if not run_finished(logdir, done, args):
                            wall = train_or_continue(ranks, seed, logdir, done, wall, args, run_flags)
                        commits = recorded_commits(logdir)
                        kept = dict(provenance, wall_s=None if wall is None else round(wall, 1),
                                    parts=len(commits) if commits else 1, commits=commits)
                        keep_evidence(logdir, evidence, kept)
                task, episodes = read_run(evidence)
                record = dict(ranks=ranks, seed=seed, cores_per_rank=args.cores_per_rank,
                              env_steps_to_target=env_steps_to_target(episodes, args.target, args.window),
                              wall_s_to_target=wall_s_to_target(episodes, args.target, args.window),
                              final_return=final_return(episodes, args.window), episodes=len(episodes),
                              wall_s=kept.get("wall_s"), parts=kept.get("parts", 1),
                              evidence=os.path.relpath(evidence, out_folder))
                records.append(record)
                print(f"[{PROGRAM}] ranks {ranks} seed {seed}: env steps to target {record['env_steps_to_target']} "
                      f"({record['wall_s_to_target']} s of training), final return {record['final_return']:.1f}",
                      flush=True)
        records.sort(key=lambda record: (ranks_list.index(record["ranks"]), seeds.index(record["seed"])))
        missing.sort(key=lambda run: (ranks_list.index(run["ranks"]), seeds.index(run["seed"])))
        if not records:  # only under --report_only: a study that trains has a record of every run or stops
            raise StudyError(f"--report_only: {evidence_root} holds no evidence of these runs (ranks {args.ranks}, "
                             f"seeds {args.seeds}); train them first, without --report_only")
        timed = bool(args.cores_per_rank)
        study = dict(task=task, flagfile=os.path.relpath(args.flagfile, REPO), extra_flags=extra,
                     job_num_envs=args.job_num_envs, cores_per_rank=args.cores_per_rank,
                     controller=args.controller, target=args.target,
                     window=args.window, budget_env_steps=args.budget_env_steps,
                     stop_at_target=args.stop_at_target, ranks=ranks_list, seeds=seeds,
                     runs=records, missing_runs=missing, summary=summarise(records, ranks_list, timed))
        if not args.cores_per_rank:
            study["compare"] = UNBOUND_NOTE
        with open(args.out + ".json", "w") as handle:
            json.dump(study, handle, indent=2)
            handle.write("\n")
        draw(study, args.out + ".png")
    except (StudyError, ScoreError, OSError) as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 2
    for row in study["summary"]:
        print(json.dumps(row))
    if not args.cores_per_rank:
        print(f"[{PROGRAM}] {UNBOUND_NOTE}")
    print(f"wrote {args.out}.json and {args.out}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
