"""How many ranks of the default --rank_scaling=batch a DQN preset takes before its env steps to a score grow,
measured on one core in a fraction of the updates:

    .venv/bin/python -m hvd_dqn.plan.step_headroom --flagfile=configs/cartpole.flags --k=1,4,8,16,32 \
        --seeds=0,1,2 --target=475 --budget_env_steps=100000 --workdir=runs/headroom \
        --out=results/scaling/cartpole_headroom

For each k, one-rank runs of the preset with k times fewer updates (--train_frequency times k) at the step size
k ranks would use (times k by the linear rule, or sqrt(k)), and the schedules counted in updates divided by k as
k ranks divide them (hvd_dqn.rank_split.update_counted_schedules): k ranks of the default, except that the
batch stays one rank's instead of k times it. Where one rank's batch is already beyond the gradient noise scale
(python -m hvd_dqn.plan.noise_scale), the larger batch of k real ranks buys little, and the step size alone
must make up for the fewer updates: the k at which these runs first need 1.25x the preset's env steps is then
where real ranks do. Each k is a scaling study of its own (python -m hvd_dqn.plan.scaling_study, one rank,
its evidence in OUT_k<k>_runs/); this command writes OUT.json with each k's median and its ratio to k = 1.
Flags after "--" go to every run.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional

from hvd_dqn.rank_split import learns_from_replay

PROGRAM = "hvd_dqn.plan.step_headroom"


def headroom_flags(config, k: int) -> List[str]:
    """The flags that make one rank of `config` update as k ranks of --rank_scaling=batch do: k times fewer
    updates per env step, the step size k ranks get, the schedules in updates on k ranks' clock."""
    from hvd_dqn.rank_split import learning_rate_scale, update_counted_schedules

    if k == 1:
        return []
    as_k_ranks = config.replace(rank_scaling="batch", scale_schedules_by_workers=True, elastic=False)
    schedules = update_counted_schedules(as_k_ranks, k)
    scale = learning_rate_scale(k, config.lr_scale_rule)
    flags = [f"--train_frequency={config.train_frequency * k}",
             f"--target_update_period={schedules.target_update_period}"]
    flags += [f"--lr_warmup_updates={schedules.lr_warmup_updates}"] if config.lr_warmup_updates else []
    flags += [f"--lr_decay_updates={schedules.lr_decay_updates}"] if config.lr_decay_updates else []
    flags.append(f"--learning_rate={config.learning_rate * scale!r}")
    if config.learning_rate_end is not None:
        flags.append(f"--learning_rate_end={config.learning_rate_end * scale!r}")
    return flags


def one_rank_study(flagfile: str, seeds: str, target: float, budget_env_steps: int, workdir: str, out: str,
                   flags: List[str], report_only: bool = False, stop_at_target: bool = False) -> Optional[dict]:
    """One-rank runs of the preset with `flags` over the seeds, as a scaling study of its own (OUT.json, its
    evidence in OUT_runs/, its runs in WORKDIR), trained where missing unless `report_only`: the study's summary,
    or None where the study failed (it has said why)."""
    from hvd_dqn.plan import scaling_study

    study_args = [f"--flagfile={flagfile}", "--ranks=1", f"--seeds={seeds}", f"--target={target:g}",
                  f"--budget_env_steps={budget_env_steps}", f"--workdir={workdir}", f"--out={out}"]
    study_args += ["--stop_at_target"] if stop_at_target else []
    study_args += ["--report_only"] if report_only else []
    if scaling_study.main(study_args + (["--", *flags] if flags else [])) != 0:
        return None
    with open(f"{out}.json") as handle:
        return json.load(handle)["summary"][0]


def first_k_past(rows: List[dict], ratio: float):
    """The smallest k whose median env steps reach `ratio` times k = 1's (a k with runs that never reached the
    target counts as beyond), or None."""
    for row in rows:
        if row["ratio"] is None or row["ratio"] >= ratio:
            return row["k"]
    return None


def main(argv=None) -> int:
    from hvd_dqn.flags import split_run_flags
    from hvd_dqn.plan import scaling_study
    from hvd_dqn.plan.study_report import StudyError
    from hvd_dqn.reports.score import ScoreError

    argv, extra = split_run_flags(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("--flagfile", required=True, help="The DQN preset.")
    parser.add_argument("--k", default="1,4,8,16", help="Factors, comma-separated; 1 (the preset itself) first.")
    parser.add_argument("--seeds", default="0,1,2", help="Seeds, comma-separated.")
    parser.add_argument("--target", type=float, required=True, help="Return that counts as reached (CartPole: 475).")
    parser.add_argument("--budget_env_steps", type=int, required=True, help="Env steps of every run.")
    parser.add_argument("--workdir", required=True, help="Folder for the runs' logdirs (outside git).")
    parser.add_argument("--out", required=True, help="Writes OUT.json; each k's study is OUT_k<k>.")
    parser.add_argument("--report_only", action="store_true", help="Train nothing; report the kept evidence.")
    args = parser.parse_args(argv)
    try:
        ks = scaling_study.parse_int_list(args.k, "k")
        if ks[0] != 1 or 0 in ks:
            raise StudyError(f"--k={args.k}: must start with 1 (the preset, the baseline) and list positive factors")
        config = scaling_study.resolved_config(args.flagfile, extra)
        if not learns_from_replay(config):
            raise StudyError("--agent=pqn: PQN's minibatch and step size do not change with the ranks")
        rows = []
        for k in ks:
            summary = one_rank_study(args.flagfile, args.seeds, args.target, args.budget_env_steps,
                                     os.path.join(args.workdir, f"k{k}"), f"{args.out}_k{k}",
                                     extra + headroom_flags(config, k), report_only=args.report_only)
            if summary is None:
                return 2
            rows.append(dict(k=k, flags=headroom_flags(config, k), runs=summary["runs"],
                             reached_target=summary["reached_target"],
                             median_env_steps_to_target=summary["median_env_steps_to_target"]))
    except (StudyError, ScoreError) as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 2
    base = rows[0]["median_env_steps_to_target"]
    if base is None:
        print(f"{PROGRAM}: error: the preset itself (k = 1) did not reach {args.target:g} within "
              f"{args.budget_env_steps:,} env steps in most seeds: raise --budget_env_steps", file=sys.stderr)
        return 2
    for row in rows:
        median = row["median_env_steps_to_target"]
        row["ratio"] = None if median is None else round(median / base, 3)
    report = dict(flagfile=args.flagfile, extra_flags=extra, target=args.target, seeds=args.seeds,
                  budget_env_steps=args.budget_env_steps, rows=rows,
                  first_k_past={"1.25": first_k_past(rows, 1.25), "1.5": first_k_past(rows, 1.5)})
    with open(args.out + ".json", "w") as handle:
        json.dump(report, handle, indent=2)
        handle.write("\n")
    for row in rows:
        ratio = "beyond the budget" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        print(f"k = {row['k']:>3}: median env steps {row['median_env_steps_to_target']} ({ratio}), "
              f"{row['reached_target']} of {row['runs']} reached {args.target:g}")
    past = report["first_k_past"]
    print(f"First past 1.25x one rank's env steps at k = {past['1.25']}, past 1.5x at k = {past['1.5']} "
          "(none: not within the k measured); k ranks of --rank_scaling=batch are predicted alike where one "
          "rank's batch is beyond the gradient noise scale.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
