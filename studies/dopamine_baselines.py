"""Rebuilds hvd_dqn/baselines/dopamine_atari_cnn.json from a checkout of google/dopamine: for each game, each
agent's per-seed training return in iterations 0-9 (baselines/atari/data/<game>_CNN.json lists, per agent, the
5 seeds of iteration 0, then iteration 1's, ...), rounded to 4 decimals, with the source kept beside them.

    .venv/bin/python studies/dopamine_baselines.py DOPAMINE_CHECKOUT breakout pong seaquest qbert spaceinvaders beamrider
"""
import json
import pathlib
import subprocess
import sys

OUT = pathlib.Path(__file__).resolve().parents[1] / "hvd_dqn" / "baselines" / "dopamine_atari_cnn.json"
ITERATIONS = 10


def game_curves(checkout: str, game: str) -> dict:
    text = subprocess.run(["git", "-C", checkout, "show", f"HEAD:baselines/atari/data/{game}_CNN.json"],
                          capture_output=True, text=True, check=True).stdout
    curves = {}
    for row in json.loads(text):
        if row["Iteration"] < ITERATIONS:
            seeds = curves.setdefault(row["Agent"], [[] for _ in range(ITERATIONS)])[row["Iteration"]]
            seeds.append(round(row["Value"], 4))
    return curves


def main() -> None:
    checkout, games = sys.argv[1], sys.argv[2:]
    kept = json.loads(OUT.read_text())
    for game in games:
        kept["games"][game] = game_curves(checkout, game)
    OUT.write_text(json.dumps(kept, indent=1) + "\n")
    print(f"{OUT}: {', '.join(sorted(kept['games']))}")


if __name__ == "__main__":
    main()
