"""The scaling study's figures from its runs' figures (each run's env steps and seconds to the target and its
return at the budget, read by hvd_dqn/reports/score.py): the medians per rank count (a run that never reached
the target counting as beyond the budget), and the study's picture."""
from __future__ import annotations

import math
import os
import statistics


class StudyError(Exception):
    """A study that cannot go on: a bad flag, a run trained with other settings in its folder."""


def censored_median(env_steps_to_target):
    """The median over all runs, a run that never reached the target counting as beyond the budget (None in
    the list): defined while fewer than half the runs failed, None otherwise (and for no runs)."""
    ordered = sorted(math.inf if value is None else value for value in env_steps_to_target)
    median = statistics.median(ordered) if ordered else math.inf
    return None if math.isinf(median) else median


def summarise(records, ranks_list, timed: bool = True):
    """Per rank count: runs, runs at the target, the median env steps to it (and, where `timed`, every rank with
    cores of its own, the median seconds) and the ratios to the fewest ranks'."""
    summary = []
    for ranks in ranks_list:
        runs = [record for record in records if record["ranks"] == ranks]
        reached = [record["env_steps_to_target"] for record in runs if record["env_steps_to_target"] is not None]
        times = [record.get("wall_s_to_target") for record in runs]
        finals = [record["final_return"] for record in runs if record["final_return"] is not None]
        summary.append(dict(ranks=ranks, runs=len(runs), reached_target=len(reached),
                            median_env_steps_to_target=censored_median([record["env_steps_to_target"]
                                                                        for record in runs]),
                            min_env_steps_to_target=min(reached) if reached else None,
                            max_env_steps_to_target=max(reached) if reached else None,
                            # Where every run that reached the target has its time (episodes.csv with wall_s).
                            median_wall_s_to_target=censored_median(times) if timed and all(
                                time is not None for time, record in zip(times, runs)
                                if record["env_steps_to_target"] is not None) else None,
                            median_final_return=statistics.median(finals) if finals else None,
                            min_final_return=min(finals) if finals else None,
                            max_final_return=max(finals) if finals else None))
    for measure in ("env_steps", "wall_s"):
        base = next((row[f"median_{measure}_to_target"] for row in summary if row["ranks"] == min(ranks_list)), None)
        for row in summary:
            median = row[f"median_{measure}_to_target"]
            row[f"{measure}_ratio_to_fewest_ranks"] = round(median / base, 3) if base and median else None
    return summary


def final_return_label(study) -> str:
    """What a run's final_return is: the return at the budget, or at the stop under --stop_at_target (the run's
    first log point at or past the target, where the return is just past the target by construction)."""
    when = "the stop" if study.get("stop_at_target") else f"{study['budget_env_steps']:,}"
    return f"mean return of the last {study['window']} episodes at {when}"


def draw(study, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hvd_dqn.reports.curves import save_figure

    # Seconds are drawn only for a study in time mode, whose every rank had cores of its own.
    timed = bool(study.get("cores_per_rank")) and any(record.get("wall_s_to_target") is not None
                                                      for record in study["runs"])
    figure, panels = plt.subplots(1, 3 if timed else 2, figsize=(16 if timed else 11, 4.5), dpi=120)
    steps_axes, return_axes = panels[:2]
    for record in study["runs"]:
        if record["env_steps_to_target"] is not None:
            steps_axes.plot(record["ranks"], record["env_steps_to_target"], "o", color="C0", alpha=0.4)
        else:
            steps_axes.plot(record["ranks"], study["budget_env_steps"], "x", color="C3")
        return_axes.plot(record["ranks"], record["final_return"], "o", color="C1", alpha=0.4)
    rows = [row for row in study["summary"] if row["median_env_steps_to_target"] is not None]
    steps_axes.plot([row["ranks"] for row in rows], [row["median_env_steps_to_target"] for row in rows], "-",
                    color="C0", label="median over seeds")
    steps_axes.axhline(study["budget_env_steps"], color="C3", linestyle=":", label="budget (x: not reached)")
    finals = [row for row in study["summary"] if row["median_final_return"] is not None]
    return_axes.plot([row["ranks"] for row in finals], [row["median_final_return"] for row in finals], "-",
                     color="C1", label="median over seeds")
    return_axes.axhline(study["target"], color="grey", linestyle="--", label=f"target {study['target']:g}")
    if timed:  # time mode: seconds of training to the target, each rank on cores of its own
        time_axes = panels[2]
        for record in study["runs"]:
            if record.get("wall_s_to_target") is not None:
                time_axes.plot(record["ranks"], record["wall_s_to_target"], "o", color="C2", alpha=0.4)
        timed_rows = [row for row in study["summary"] if row.get("median_wall_s_to_target") is not None]
        time_axes.plot([row["ranks"] for row in timed_rows], [row["median_wall_s_to_target"] for row in timed_rows],
                       "-", color="C2", label="median over seeds")
        time_axes.set_ylabel(f"seconds of training to the target ({study['cores_per_rank']} core(s) per rank)")
    for axes in panels:
        axes.set_xscale("log", base=2)
        axes.set_xticks(study["ranks"], [str(ranks) for ranks in study["ranks"]])
        axes.set_xlabel("ranks")
        axes.grid(alpha=0.3)
        axes.legend(fontsize="small")
    steps_axes.set_ylabel(f"env steps until the mean of {study['window']} training episodes >= {study['target']:g}")
    return_axes.set_ylabel(final_return_label(study))
    measured = "sample efficiency and time" if timed else "sample efficiency"
    figure.suptitle(f"{study['task']}: {measured} against ranks ({os.path.basename(study['flagfile'])})")
    save_figure(figure, path)
