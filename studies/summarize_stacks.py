"""Summarises what studies/compare_stacks.sh measured: the two stacks' versions and set-up times, and for each
benchmark figure the median over the rounds of each stack and their ratio (after / before).

    python studies/summarize_stacks.py OUT_DIR     # writes OUT_DIR/summary.json, prints a Markdown table
"""
import glob
import json
import os
import statistics
import subprocess
import sys

SIDES = ("before", "after")
# Figures whose larger value is worse; every other benchmark figure is a rate.
LOWER_IS_BETTER = {"replay_bytes_per_transition"}
# Numbers in the benchmark's JSON that describe the set-up measured, not a measurement.
SETTINGS = {"batch_size", "cores", "num_envs", "round_seconds", "rounds", "ranks"}


def versions(side_dir: str) -> dict:
    """The commit and the versions of Python, TensorFlow, Keras behind tf.keras, NumPy and Horovod in a side's venv."""
    python = os.path.join(side_dir, "repo", ".venv", "bin", "python")
    probe = ("import json, platform, importlib.metadata as m\n"
             "def version(name):\n"
             "    try:\n        return m.version(name)\n"
             "    except m.PackageNotFoundError:\n        return None\n"
             "print(json.dumps({'python': platform.python_version(),"
             " **{name: version(name) for name in ('tensorflow', 'tf-keras', 'numpy', 'horovod')}}))\n")
    found = json.loads(subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True).stdout)
    found["commit"] = subprocess.run(["git", "-C", os.path.join(side_dir, "repo"), "rev-parse", "--short", "HEAD"],
                                     capture_output=True, text=True, check=True).stdout.strip()
    return found


def main(out: str) -> None:
    summary = {"stacks": {}, "setup_seconds": {}, "figures": {}}
    rounds = {side: [json.load(open(path)) for path in sorted(glob.glob(os.path.join(out, f"bench-{side}-*.json")))]
              for side in SIDES}
    for side in SIDES:
        summary["stacks"][side] = versions(os.path.join(out, side))
        with open(os.path.join(out, side, "setup_seconds")) as handle:
            summary["setup_seconds"][side] = int(handle.read())
        if not rounds[side]:
            sys.exit(f"{out}: no bench-{side}-*.json; run studies/compare_stacks.sh first")
    numeric = [key for key, value in rounds["after"][0].items()
               if isinstance(value, (int, float)) and not isinstance(value, bool) and key not in SETTINGS
               and all(key in result for side in SIDES for result in rounds[side])]
    for key in sorted(numeric):
        medians = {side: statistics.median(result[key] for result in rounds[side]) for side in SIDES}
        summary["figures"][key] = {**medians, "rounds": {side: [r[key] for r in rounds[side]] for side in SIDES},
                                   "after_over_before": medians["after"] / medians["before"] if medians["before"] else None}
    with open(os.path.join(out, "summary.json"), "w") as handle:
        json.dump(summary, handle, indent=2, sort_keys=True)

    def stack(side):
        found = summary["stacks"][side]
        return (f"{found['commit']}: Python {found['python']}, TF {found['tensorflow']}"
                f"{', tf-keras ' + found['tf-keras'] if found.get('tf-keras') else ''}, NumPy {found['numpy']}")

    print(f"before = {stack('before')}\nafter  = {stack('after')}\n")
    print("| figure | before | after | after / before |\n| --- | --- | --- | --- |")
    setup = summary["setup_seconds"]
    print(f"| set-up from empty caches, both at once (s) | {setup['before']:,} | {setup['after']:,} | "
          f"{setup['after'] / setup['before']:.2f} |")
    for key, figure in summary["figures"].items():
        ratio = figure["after_over_before"]
        note = " (lower is better)" if key in LOWER_IS_BETTER else ""
        print(f"| {key}{note} | {figure['before']:,.2f} | {figure['after']:,.2f} | "
              f"{'-' if ratio is None else f'{ratio:.2f}'} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python studies/summarize_stacks.py OUT_DIR")
    main(sys.argv[1])
