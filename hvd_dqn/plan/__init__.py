"""Planning: how many workers, which machines and how long, from measured costs and measured runs.

Commands (each `python -m hvd_dqn.plan.NAME --help`):
- `cost_model`: N workers' env steps per second predicted from measured stage costs (`--validate` checks it
  against real runs), and GPU nodes on paper (`--paper`) from a hardware profile (`--profile`).
- `calibrate`: this machine's hardware profile for the cost model (its GPUs, Horovod's build, every part timed);
  `--check_gpu` checks a GPU machine's set-up.
- `scaling_study`: trains a preset at several rank counts and seeds to a target return; env steps (and, with
  `--cores_per_rank`, seconds) to the target per rank count.
- `noise_scale`: the gradient noise scale of a run's replayed minibatches, and the batch past which more ranks
  stop paying.
- `step_headroom`: one-rank runs with k ranks' updates and step size, to find where sample efficiency falls.

Their parts: `cost_formula` (the cost model's arithmetic), `hardware_profiles`, `gpu_costs` and `gpu_paper`
(GPUs on paper), `profile_parts` (calibrate's timings), `study_runs` and `study_report` (the scaling study's
runs and its summary).
"""
