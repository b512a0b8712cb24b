"""Which change to a DQN preset keeps its env steps to a score where k ranks of the default --rank_scaling=batch
first lose them: each lever is one-rank runs with k ranks' updates, step size and schedules
(hvd_dqn.plan.step_headroom's flags, worked out with the lever's flags in place, so that a lever that changes the
step-size rule or the update rate is scaled as k ranks would scale it), compared with the preset's own k = 1 study.

    .venv/bin/python studies/headroom_levers.py --flagfile=configs/cartpole.flags --k=32 --seeds=0,1,2 \
        --target=475 --budget_env_steps=100000 --baseline=results/scaling/cartpole_headroom_k1.json \
        --workdir=runs/headroom_levers --out=results/scaling/cartpole_levers_k32 \
        --lever="sqrt:--lr_scale_rule=sqrt" --lever="adam_eps:--adam_epsilon=0.0003125"

A lever is NAME:FLAGS (FLAGS space-separated, added after the preset's); NAME: without flags is the control.
Each lever's runs are a scaling study of their own, OUT_<name>.json with its evidence in OUT_<name>_runs/, ended
at the target (--stop_at_target: the env steps to it are those of a run trained to the budget). Writes OUT.json:
per lever, its flags, the headroom flags they led to, the seeds that reached the target and the median against
the baseline's."""
from __future__ import annotations

import argparse
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from hvd_dqn.plan import scaling_study  # noqa: E402
from hvd_dqn.plan.step_headroom import headroom_flags, one_rank_study  # noqa: E402


def parse_lever(text: str):
    name, sep, flags = text.partition(":")
    if not name.isidentifier() or not sep:
        raise SystemExit(f"--lever={text!r}: expected NAME:FLAGS, e.g. sqrt:--lr_scale_rule=sqrt (NAME: alone is "
                         "the control, k ranks' flags without a lever)")
    return name, flags.split()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flagfile", required=True)
    parser.add_argument("--k", type=int, required=True, help="The rank count the levers are measured at.")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--target", type=float, required=True)
    parser.add_argument("--budget_env_steps", type=int, required=True)
    parser.add_argument("--baseline", required=True, help="The preset's k = 1 study (a scaling study's JSON).")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--lever", action="append", required=True, help="NAME:FLAGS; repeat for more levers.")
    parser.add_argument("--report_only", action="store_true")
    args = parser.parse_args()
    with open(args.baseline) as handle:
        base = json.load(handle)["summary"][0]["median_env_steps_to_target"]
    rows = []
    for name, lever_flags in map(parse_lever, args.lever):
        config = scaling_study.resolved_config(args.flagfile, lever_flags)
        flags = lever_flags + headroom_flags(config, args.k)
        summary = one_rank_study(args.flagfile, args.seeds, args.target, args.budget_env_steps,
                                 os.path.join(args.workdir, name), f"{args.out}_{name}", flags,
                                 report_only=args.report_only, stop_at_target=True)
        if summary is None:
            return 2
        median = summary["median_env_steps_to_target"]
        rows.append(dict(lever=name, lever_flags=lever_flags, run_flags=flags, runs=summary["runs"],
                         reached_target=summary["reached_target"], median_env_steps_to_target=median,
                         ratio_to_baseline=None if median is None else round(median / base, 3)))
    report = dict(flagfile=args.flagfile, k=args.k, seeds=args.seeds, target=args.target,
                  budget_env_steps=args.budget_env_steps, baseline=args.baseline,
                  baseline_median_env_steps_to_target=base, rows=rows)
    with open(args.out + ".json", "w") as handle:
        json.dump(report, handle, indent=2)
        handle.write("\n")
    for row in rows:
        ratio = "beyond the budget" if row["ratio_to_baseline"] is None else f"{row['ratio_to_baseline']:.2f}x"
        print(f"{row['lever']:>12}: {row['reached_target']} of {row['runs']} reached {args.target:g}, median "
              f"{row['median_env_steps_to_target']} ({ratio} the preset's k = 1 median {base:,})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
