"""Measuring: what a preset costs on this machine, part by part and as whole jobs, apart from training itself.

Commands (each `python -m hvd_dqn.measure.NAME --help`):
- `benchmark`: one rank's pipeline stages side by side (emulators, acting, update, replay, exported policy) and,
  under horovodrun, the gradient exchange.
- `benchmark_workers`: real training runs with 1 and N workers, one core each, in alternating rounds: the
  speed-up in env steps per second and, with `--corun`, the ceiling the cores allow.
- `update_costs`: several presets' updates (DQN, QR-DQN, IQN, C51, Rainbow, ...) timed side by side: what each
  agent's update costs, and the agent steps per second its learner allows on one core.

Their parts: `stages` and `training_modes` (the benchmark's figures), `allreduce` (the exchange), `corun` (lone
rank-sized runs at once), `timing` (alternating rounds, so both sides of a ratio see the same machine load).
"""
