#!/usr/bin/env bash
# A c10d job over plain ssh: the coordinator here, PER_HOST ranks on each
# host given. Every host needs the program at the same path.
#   deploy/ssh-job.sh "node1 node2" 4 ./train --epochs 3
set -euo pipefail
hosts=($1) per_host=$2
shift 2
port=${C10D_PORT:-29500}
here=$(hostname -I | awk '{print $1}')
job=${C10D_JOB:-ssh-$$}
world=$(( ${#hosts[@]} * per_host ))

c10d-coord --listen "tcp://0.0.0.0:$port" --db "c10d-$job.db" &
coord=$!
trap 'kill $coord 2>/dev/null || true' EXIT

pids=()
rank=0
for h in "${hosts[@]}"; do
    for local in $(seq 0 $((per_host - 1))); do
        ssh "$h" "C10D_COORD=tcp://$here:$port C10D_JOB=$job RANK=$rank LOCAL_RANK=$local" \
            "WORLD_SIZE=$world C10D_TOKEN=${C10D_TOKEN:-} $(printf '%q ' "$@")" &
        pids+=($!)
        rank=$((rank + 1))
    done
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=$?; done
c10d-ctl --coord "tcp://127.0.0.1:$port" status
exit $status
