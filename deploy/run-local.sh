#!/usr/bin/env bash
# Starts a coordinator for one job on this host, in the foreground.
#   deploy/run-local.sh [PORT] [DB]
# Ranks then find it with C10D_COORD=tcp://<this-host>:PORT (or torchrun's
# MASTER_ADDR/MASTER_PORT).
set -euo pipefail
port=${1:-29700}
db=${2:-$PWD/c10d-coord.db}
exec c10d-coord --listen "tcp://0.0.0.0:$port" --db "$db"
