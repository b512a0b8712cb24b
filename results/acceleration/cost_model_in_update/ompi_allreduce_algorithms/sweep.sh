#!/bin/bash
# The MinAtar exchange inside the update under Open MPI's allreduce algorithms, in turns (stop 43, the first
# design of exchange_in_update: one difference of medians over 3 rounds). mpirun passes OMPI_MCA_* on to the ranks.
cd /work/main && source scripts/launch_env.sh
for rep in 1 2; do
for setting in default alg3 alg4 alg6 alg2; do
  if [[ $setting == alg* ]]; then export OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=${setting#alg}; else unset OMPI_MCA_coll_tuned_use_dynamic_rules OMPI_MCA_coll_tuned_allreduce_algorithm; fi
  .venv/bin/horovodrun -np 2 --mpi .venv/bin/python -m hvd_dqn.benchmark --flagfile=configs/minatar.flags --cores_per_rank=1 \
     --allreduce_busy_ms=2.1 --exchange_batch_size=32 --exchange_acting_ms=0.09 --round_seconds=2 --rounds=3 \
     --json=/tmp/sweep_${setting}_${rep}.json > /tmp/sweep_${setting}_${rep}.log 2>&1
  python3 -c "import json;d=json.load(open('/tmp/sweep_${setting}_${rep}.json'));print('$setting $rep', *(f\"{k}={d[k]:.3f}\" for k in ('allreduce_ms_per_update','update_exchanged_ms','update_alone_ms','exchange_in_update_ms')))"
done; done
