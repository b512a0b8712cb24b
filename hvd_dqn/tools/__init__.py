"""Tools for planning a cluster and checking a preset, apart from training itself.

Commands (each `python -m hvd_dqn.tools.NAME --help`):
- `benchmark`: one rank's pipeline stages side by side (emulators, acting, update, replay, exported policy) and,
  under horovodrun, the gradient exchange.
- `benchmark_workers`: real training runs with 1 and N workers, one core each, in alternating rounds: the
  speed-up in env steps per second and, with `--corun`, the ceiling the cores allow.
- `cost_model`: N workers' env steps per second predicted from measured stage costs (`--validate` checks it
  against real runs), and GPU nodes on paper (`--paper`) from a hardware profile (`--profile`).
- `calibrate`: this machine's hardware profile for the cost model (its GPUs, Horovod's build, every part timed);
  `--check_gpu` checks a GPU machine's set-up.
- `scaling_study`: trains a preset at several rank counts and seeds to a target return; env steps (and, with
  `--cores_per_rank`, seconds) to the target per rank count.
- `noise_scale`: the gradient noise scale of a run's replayed minibatches, and the batch past which more ranks
  stop paying.
- `step_headroom`: one-rank runs with k ranks' updates and step size, to find where sample efficiency falls.
- `score`: a run's score over a window of training episodes, beside a published baseline.

Their parts: `stages` and `training_modes` (the benchmark's figures), `allreduce` (the exchange), `corun`
(lone rank-sized runs at once), `cost_formula` (the cost model's arithmetic), `hardware_profiles`, `gpu_costs`
and `gpu_paper` (GPUs on paper), `profile_parts` (calibrate's timings), `timing` (alternating rounds),
`study_runs` and `study_report` (the scaling study's runs and its report)."""
