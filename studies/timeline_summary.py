"""Where an allreduce's time goes, from a Horovod timeline (horovodrun --timeline-filename FILE.json):

    .venv/bin/python studies/timeline_summary.py FILE.json [--skip_fraction=0.5]

Prints, for every phase the timeline records (NEGOTIATE_ALLREDUCE: waiting until every rank has asked for the
tensor, which includes waiting for the background thread's next cycle; MPI_ALLREDUCE or GLOO_ALLREDUCE: the
data exchange; MEMCPY_*_FUSION_BUFFER ...), how often it ran and its mean and median duration in microseconds,
over the later part of the run (--skip_fraction leaves out start-up and the memory fill)."""
import argparse
import collections
import json
import statistics
import sys


def phase_durations(path: str) -> dict:
    """{phase name: [durations in us, in order]} of a Horovod timeline (a Chrome trace, often left unclosed)."""
    with open(path) as handle:
        text = handle.read().rstrip().rstrip(",")
    events = json.loads(text if text.endswith("]") else text + "]")
    open_phases, durations = collections.defaultdict(list), collections.defaultdict(list)
    for event in events:
        if event.get("ph") == "B":
            open_phases[event["pid"]].append((event["name"], event["ts"]))
        elif event.get("ph") == "E" and open_phases[event["pid"]]:
            name, start = open_phases[event["pid"]].pop()
            durations[name].append(event["ts"] - start)
    return durations


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("timeline")
    parser.add_argument("--skip_fraction", type=float, default=0.5)
    args = parser.parse_args(argv)
    try:
        durations = phase_durations(args.timeline)
    except (OSError, ValueError) as error:
        print(f"timeline_summary.py: error: {args.timeline}: {error}", file=sys.stderr)
        return 2
    print(f"{'phase':28s} {'count':>8s} {'mean us':>10s} {'median us':>10s}")
    for name, values in sorted(durations.items()):
        kept = values[int(len(values) * args.skip_fraction):]
        if kept:
            print(f"{name:28s} {len(kept):8d} {statistics.mean(kept):10.1f} {statistics.median(kept):10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
