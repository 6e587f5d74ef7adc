#!/usr/bin/env bash
# A c10d job under Slurm: the coordinator on the first node, one rank per task.
#   sbatch -N 2 --ntasks-per-node=4 deploy/slurm-job.sh ./train --epochs 3
#SBATCH --job-name=c10d
set -euo pipefail
head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
port=${C10D_PORT:-29700}
export C10D_COORD=tcp://$head:$port
export C10D_JOB=${C10D_JOB:-slurm-$SLURM_JOB_ID}
export WORLD_SIZE=$SLURM_NTASKS

# The coordinator: one process on the head node, database next to the job.
srun --nodes=1 --ntasks=1 -w "$head" --overlap \
    c10d-coord --listen "tcp://0.0.0.0:$port" --db "c10d-$SLURM_JOB_ID.db" &
coord=$!
trap 'kill $coord 2>/dev/null || true' EXIT
sleep 1 # ranks retry until it answers; this only avoids noise in the log

# One rank per task: RANK from SLURM_PROCID, LOCAL_RANK from SLURM_LOCALID.
srun --kill-on-bad-exit=1 bash -c \
    'RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID exec "$@"' _ "$@"
