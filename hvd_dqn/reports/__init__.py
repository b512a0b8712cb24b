"""Reports: what finished runs show, read from their raw episodes (episodes.csv, with config.json beside it), in a
logdir or a results/ folder.

Commands (each `python -m hvd_dqn.reports.NAME --help`):
- `curves`: learning curves of runs or groups of seeds into a PNG, with bands over ranks or seeds.
- `score`: a run's mean return over its last episodes, and when it first reached a target.
- `baseline`: a run beside Dopamine's published curve, per 250k-step iteration (hvd_dqn/baselines/).
- `suite`: a suite of Atari runs, game by game and agent by agent, against Dopamine's agents: the table and its
  small multiples.
"""
