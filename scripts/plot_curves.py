#!/usr/bin/env python
"""Draws training curves (raw episode return against env frames) from hvd_dqn logdirs into a PNG.

    .venv/bin/python scripts/plot_curves.py runs/pong --out=pong.png
    .venv/bin/python scripts/plot_curves.py dqn=runs/s0,runs/s1,runs/s2 rainbow=runs/r0,runs/r1 --out=cmp.png

Each positional argument is one curve, `[label=]logdir[,logdir...]`. A curve is the mean over the last
--window episodes at each point; its band is the range over the run's ranks (one logdir) or over the runs
(several logdirs, e.g. seeds), drawn where there are two or more. Evaluation returns are drawn as markers, and the
target return as a dashed line: --target, or the runs' own --stop_at_train_return where they share one. See
hvd_dqn/logdir/curves.py.
"""
import argparse
import os
import sys

PROGRAM = "plot_curves.py"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("curves", nargs="+", metavar="[LABEL=]LOGDIR[,LOGDIR...]")
    parser.add_argument("--out", required=True, help="PNG file to write.")
    parser.add_argument("--window", type=int, default=10, help="Episodes averaged at each point (default 10).")
    parser.add_argument("--title", default=None, help="Figure title (default: the environment ids).")
    parser.add_argument("--target", type=float, default=None,
                        help="A return to draw as a dashed line (default: the runs' --stop_at_train_return, where "
                             "they all have the same one).")
    args = parser.parse_args(argv)

    from hvd_dqn.logdir.curves import CurveError, load_run, make_curve, parse_curve_argument

    try:
        if args.window <= 0:
            raise CurveError(f"--window={args.window}: must be a positive number of episodes")
        if not args.out.lower().endswith(".png"):
            raise CurveError(f"--out={args.out}: must end in .png")
        folder = os.path.dirname(os.path.abspath(args.out))
        if not os.path.isdir(folder):
            raise CurveError(f"--out={args.out}: folder {folder} does not exist")
        curves, env_ids, frames_per_step, targets = [], set(), set(), set()
        for argument in args.curves:
            label, logdirs = parse_curve_argument(argument)
            runs = [load_run(logdir) for logdir in logdirs]
            env_ids.update(run.env_id for run in runs)
            frames_per_step.update(run.frames_per_step for run in runs)
            targets.update(run.target_return for run in runs)
            curves.append(make_curve(label, runs, args.window))
        target = args.target if args.target is not None else (targets.pop() if len(targets) == 1 else None)
        draw(curves, args.out, args.title or ", ".join(sorted(env_ids)), frames_per_step == {1}, args.window, target)
    except (CurveError, OSError) as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}")
    return 0


def draw(curves, path: str, title: str, steps_are_frames: bool, window: int, target=None) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only; no display needed
    import matplotlib.pyplot as plt

    from hvd_dqn.logdir.curves import save_figure

    figure, axes = plt.subplots(figsize=(8, 5), dpi=120)
    for index, curve in enumerate(curves):
        color = f"C{index}"
        banded = curve.group_size > 1  # one rank's or one run's curve has no range to draw
        axes.plot(curve.points, curve.mean, color=color,
                  label=f"{curve.label} (band: range over {curve.group_size} {curve.group})" if banded else curve.label)
        if banded:
            axes.fill_between(curve.points, curve.low, curve.high, color=color, alpha=0.2, linewidth=0)
        for eval_index, (points, returns) in enumerate(zip(curve.eval_points, curve.eval_returns)):
            axes.plot(points, returns, "o", color=color, markersize=4, markeredgecolor="black",
                      markeredgewidth=0.5, label=f"{curve.label} evaluation" if eval_index == 0 and len(points) else None)
    if target is not None:
        axes.axhline(target, color="black", linestyle="--", linewidth=1, label=f"target {target:g}")
    axes.set_xlabel("env steps (summed over ranks)" if steps_are_frames else "emulator frames (summed over ranks)")
    axes.set_ylabel(f"episode return (raw score; mean of last {window} episodes)")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(loc="best", fontsize="small")
    save_figure(figure, path)


if __name__ == "__main__":
    sys.exit(main())
