"""The measurements behind the project's figures: the pipeline's stages side by side (`stages`, with the
trainer's iteration in each overlap mode, `training_modes`), the gradient allreduce (`allreduce`), the rates'
alternating-rounds timing (`timing`), and the scaling study's runs and report (`study_runs`, `study_report`).
The commands that print them are `hvd_dqn.benchmark`, `hvd_dqn.benchmark_workers` and `hvd_dqn.scaling_study`."""
