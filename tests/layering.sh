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
forbid "common/*.c common/*.h" '(\.\./)?(server|client)/.*|engine\.h|internal\.h|group\.h' \
    "common/ includes nothing of the server or the client"
forbid "server/*.c server/*.h" '(\.\./)*client/.*|internal\.h|group\.h|backend\.h|conn_stream\.h' \
    "the coordinator includes nothing of the client library (the public headers' codes and limits only)"
# the front end's own headers (every one of them: each declares one module's)
front='group|group_seqs|plan|lane|work|posted|liveness|watch|verify|join_region|join_internal'
front+='|backends|backend_ctx|monitored_barrier|program_plane'
forbid "client/src/host/* client/src/nccl/* client/src/external/*" "(\.\./)?($front)\.h" \
    "a backend sees its context (backend.h), never the process group or the world"
# What a backend includes (backend.h, internal.h) must not bring the
# connection with it: a backend reaches the coordinator through its
# context's hooks and store only.
forbid "client/src/host/* client/src/nccl/* client/src/external/* client/src/backend.h client/src/internal.h" \
    '(\.\./)?(conn|conn_stream|store_internal)\.h' \
    "a backend never sees the connection to the coordinator (conn.h) nor the store's insides"
# The connection's state and lock are its own: outside its two files the
# library has conn.h, the connection's narrow face; and calls inside it go
# one way, conn.c -> conn_stream.c.
forbid "$(ls client/src/*.[ch] | grep -vE '^client/src/conn(_stream)?\.c$')" \
    '(\.\./)?conn_stream\.h' \
    "only the connection's files (conn.c, conn_stream.c) see its state (conn_stream.h)"
forbid "client/src/conn_stream.c client/src/conn_stream.h" '(\.\./)?conn\.h' \
    "the connection's stream is beneath conn.c, which it never calls (conn.h)"
forbid "client/ctl/*.c client/ctl/*.h client/run/*.c python/csrc/*.cpp python/csrc/*.hpp examples/*.c" \
    '(\.\./)*(src|client/src)/.*|internal\.h|group\.h|backend\.h|fingerprint\.h|c10d\.pb-c\.h' \
    "tools and the torch backend use the public API only (<c10d/c10d.h>)"
# $1: files, $2: an extended regex of names they must not use, $3: why
forbid_name() {
    local hits
    # shellcheck disable=SC2086
    hits=$(grep -HnE "$2" $1 2>/dev/null | grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/?\*|//)')
    if [ -n "$hits" ]; then
        echo "layering: $3:"
        echo "$hits" | sed 's/^/  /'
        bad=1
    fi
}
forbid_name "client/src/host/* client/src/nccl/* client/src/backend.h client/src/internal.h" \
    '\bc10di_(conn|call)' "a backend never names the connection to the coordinator"
forbid_name client/src/conn_stream.c \
    '\bc10di_(call|call_once|call_drop|conn_open|conn_ref|conn_unref|conn_url|conn_limits|conn_epoch)\(' \
    "the connection's stream (conn_stream.c) calls nothing of conn.c"
# A call's stages below plan.c return what they found (c10di_outcome);
# the call's end records it (liveness.c): they call nothing of liveness,
# and plan.c's stages never call back up into plan.c.
forbid "client/src/verify.c client/src/join_region.c" '(\.\./)?(liveness|plan)\.h' \
    "verification and join's region return their findings to the call (plan.c), never record them"
forbid "client/src/liveness.c client/src/liveness.h" '(\.\./)?(plan|verify|join_region|work|posted)\.h' \
    "liveness is beneath the call's stages: it calls none of them"
# The coordinator's network side (server/listener_internal.h): the
# readiness loop calls back only the callbacks it was started with, and the
# read loop and the reply queue reach a dialect only through its codec.
forbid_name server/readiness.c '\bc10ds_conn_[a-z_]+\(' \
    "the readiness loop calls the read loop only through its c10ds_ready_ops"
forbid_name "server/framing.c server/connection.c" \
    '\bc10ds_ts_|\bts_(parse|reply|open|close)\(|\bc10ds_codec_tcpstore\b' \
    "the read loop and the reply queue reach TCPStore's dialect only through its codec"
if [ "$bad" = 0 ]; then
    echo "layering: every include is where docs/architecture.md allows it"
fi
exit "$bad"
