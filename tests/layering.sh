#!/usr/bin/env bash
# What may include what (docs/architecture.md, "Folders, and what may
# include what"): fails naming each include that crosses a line.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bad=0
# $1: files (a glob), $2: an extended regex of forbidden includes, $3: why
forbid() {
    local hits
    # shellcheck disable=SC2086
    hits=$(grep -HnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"<]($2)[\">]" $1 2>/dev/null)
    if [ -n "$hits" ]; then
        echo "layering: $3:"
        echo "$hits" | sed 's/^/  /'
        bad=1
    fi
}
forbid "common/*.c common/*.h" '(\.\./)?(server|client)/.*|engine\.h|internal\.h|pg_internal\.h' \
    "common/ includes nothing of the server or the client"
forbid "server/*.c server/*.h" '(\.\./)*client/.*|internal\.h|pg_internal\.h|backend\.h|conn_internal\.h' \
    "the coordinator includes nothing of the client library (the public headers' codes and limits only)"
forbid "client/src/host/* client/src/nccl/*" '(\.\./)?(pg_internal|work|join_internal|conn_internal)\.h' \
    "a backend sees its context (backend.h), never the process group or the world"
forbid "client/ctl/*.c client/ctl/*.h client/run/*.c python/csrc/*.cpp python/csrc/*.hpp examples/*.c" \
    '(\.\./)*(src|client/src)/.*|internal\.h|pg_internal\.h|backend\.h|fingerprint\.h|c10d\.pb-c\.h' \
    "tools and the torch backend use the public API only (<c10d/c10d.h>)"
if [ "$bad" = 0 ]; then
    echo "layering: every include is where docs/architecture.md allows it"
fi
exit "$bad"
