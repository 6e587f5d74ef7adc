#!/usr/bin/env bash
# A c10d job over plain ssh: the coordinator here, PER_HOST ranks on each
# host given. Every host needs the program at the same path.
#   deploy/ssh-job.sh "node1 node2" 4 ./train --epochs 3
# C10D_TOKEN, if set, is the coordinator's and reaches the ranks through
# ssh's stdin, never a command line.
set -euo pipefail
hosts=($1) per_host=$2
shift 2
port=${C10D_PORT:-29700}
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
        # The token goes on ssh's stdin, read by the remote shell: on a
        # command line (ssh's here, the remote shell's there) anyone on
        # either host could read it with ps. The rank's stdin is then empty.
        ssh "$h" "IFS= read -r C10D_TOKEN || :;" \
            "if [ -n \"\$C10D_TOKEN\" ]; then export C10D_TOKEN; else unset C10D_TOKEN; fi;" \
            "export C10D_COORD=tcp://$here:$port C10D_JOB=$job RANK=$rank LOCAL_RANK=$local" \
            "WORLD_SIZE=$world; exec $(printf '%q ' "$@")" <<<"${C10D_TOKEN:-}" &
        pids+=($!)
        rank=$((rank + 1))
    done
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=$?; done
c10d-ctl --coord "tcp://127.0.0.1:$port" status
exit $status
