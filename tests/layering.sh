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
forbid "common/*.c common/*.h" '(\.\./)?(server|client)/.*|(engine/)?engine\.h|internal\.h|(group/)?group\.h' \
    "common/ includes nothing of the server or the client"
server_files="server/*.[ch] server/*/*.[ch]"
forbid "$server_files" '(\.\./)*client/.*|internal\.h|(conn|coll|group|backend|host|nccl|external)/[a-z_]+\.h' \
    "the coordinator includes nothing of the client library (the public headers' codes and limits only)"
# The coordinator's folders (server/README.md): the network side is above
# every subsystem, and the database beneath them all.
forbid "server/store/* server/groups/* server/verify/* server/join/* server/db/* server/replica/* server/engine/*" \
    'net/[a-z_]+\.h' \
    "nothing beneath the network side includes it (server/net/): requests reach the engine decoded"
forbid "server/store/* server/groups/* server/verify/* server/join/* server/db/* server/replica/* server/engine/* server/metrics/counters.*" \
    'metrics/metrics\.h' \
    "the metrics endpoint (metrics/metrics.h) is above the engine: only main.c starts it"
forbid "server/metrics/counters.*" '(engine|net|store|groups|verify|join|replica)/[a-z_]+\.h' \
    "metrics/counters.h is beneath the engine, which holds it: it knows the database only"
forbid "server/db/*" '(engine|store|groups|verify|join|net)/[a-z_]+\.h' \
    "the database (server/db/) is beneath the engine and every subsystem"
forbid "server/store/*" '(groups|verify|join)/[a-z_]+\.h' \
    "the store knows no jobs, groups, verification or join"
forbid "server/verify/* server/groups/*" 'join/[a-z_]+\.h' \
    "verification and membership never call into join, which builds on them and hears them (events.h)"
# the front end's own folders (every header in them declares one module's)
forbid "client/src/host/* client/src/nccl/* client/src/external/*" \
    '(\.\./)?((group|coll|join|conn|store)/[a-z_]+|backend/backends|backend/backend_ctx)\.h' \
    "a backend sees its context (backend/backend.h), never the process group or the world"
# What a backend includes (backend.h, internal.h) must not bring the
# connection with it: a backend reaches the coordinator through its
# context's hooks and store only.
forbid "client/src/host/* client/src/nccl/* client/src/external/* client/src/backend/backend.h client/src/internal.h" \
    '(\.\./)?(conn/[a-z_]+|store/store_internal)\.h' \
    "a backend never sees the connection to the coordinator (conn/) nor the store's insides"
# The connection's state and lock are its own: outside client/src/conn/ the
# library has conn.h, the connection's narrow face; and calls inside it go
# one way, conn.c -> the stream's files (conn_stream.c, conn_reader.c,
# conn_dial.c, conn_probe.c), which share conn_stream_internal.h among
# themselves.
stream_files="client/src/conn/conn_stream.c client/src/conn/conn_reader.c client/src/conn/conn_dial.c
              client/src/conn/conn_probe.c"
forbid "$(ls client/src/*.[ch] client/src/*/*.[ch] | grep -v '^client/src/conn/')" \
    '(\.\./)?conn/conn_stream(_internal)?\.h' \
    "only the connection's files (client/src/conn/) see its state (conn_stream.h)"
forbid "$(ls client/src/conn/*.[ch] | grep -vE '/conn_(stream|reader|dial|probe)\.c$|/conn_stream_internal\.h$')" \
    '(\.\./)?conn/conn_stream_internal\.h' \
    "only the stream's files see what they share (conn_stream_internal.h)"
forbid "$stream_files client/src/conn/conn_stream.h client/src/conn/conn_stream_internal.h" \
    '(\.\./)?conn/conn\.h' \
    "the connection's stream is beneath conn.c, which it never calls (conn.h)"
forbid "client/ctl/*.c client/ctl/*.h client/run/*.c python/csrc/*.cpp python/csrc/*.hpp examples/*.c" \
    '(\.\./)*(src|client/src)/.*|internal\.h|(group|coll|conn|backend|host|nccl|external)/[a-z_]+\.h|fingerprint\.h|c10d\.pb-c\.h' \
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
forbid_name "client/src/host/* client/src/nccl/* client/src/backend/backend.h client/src/internal.h" \
    '\bc10di_(conn|call)' "a backend never names the connection to the coordinator"
forbid_name "$stream_files" \
    '\bc10di_(call|call_once|call_drop|conn_open|conn_ref|conn_unref|conn_url|conn_limits|conn_epoch)\(' \
    "the connection's stream (conn_stream.c, conn_reader.c, conn_dial.c) calls nothing of conn.c"
# Within the stream, calls go down (conn_stream_internal.h): the round trip
# calls the reader and the dial, the reader the dial's failover, and the
# dial neither.
forbid_name "client/src/conn/conn_reader.c client/src/conn/conn_dial.c" \
    '\bc10di_conn_(roundtrip|stream_init|stream_fini)\(' \
    "the reader and the dial never call back up into the round trip (conn_stream.c)"
forbid_name client/src/conn/conn_dial.c '\bc10di_conn_(read_replies|ask_reading|rx_arm|rx_done)\b' \
    "the dial never calls the reader (conn_reader.c): its caller arms a TLS stream's receive"
forbid_name client/src/conn/conn_probe.c \
    '\bc10di_conn_(roundtrip|dial|read_replies|ask_reading|rx_arm|rx_done|broken|not_leader|leader_moved)\b' \
    "the probe asks on streams of its own, with the dialers only: the round trip acts on its answer"
# A call's stages below plan.c return what they found (c10di_outcome);
# the call's end records it (liveness.c): they call nothing of liveness,
# and plan.c's stages never call back up into plan.c.
forbid "client/src/coll/verify.c client/src/join/join_region.c" '(\.\./)?(group/liveness|coll/plan)\.h' \
    "verification and join's region return their findings to the call (plan.c), never record them"
forbid "client/src/group/liveness.c client/src/group/liveness.h" \
    '(\.\./)?(coll/plan|coll/verify|join/join_region|coll/work|coll/posted)\.h' \
    "liveness is beneath the call's stages: it calls none of them"
# The coordinator's network side (server/net/listener_internal.h): the
# readiness loop calls back only the callbacks it was started with, and the
# read loop and the reply queue reach a dialect only through its codec.
forbid_name server/net/readiness.c '\bc10ds_conn_[a-z_]+\(' \
    "the readiness loop calls the read loop only through its c10ds_ready_ops"
forbid_name "server/net/framing.c server/net/connection.c" \
    '\bc10ds_ts_|\bts_(parse|reply|open|close)\(|\bc10ds_codec_tcpstore\b' \
    "the read loop and the reply queue reach TCPStore's dialect only through its codec"
# TCPStore's wire is read and written apart from any connection (so that
# it is tested alone), and nothing packs a request only to unpack it, or
# unpacks a reply the engine made: the engine takes decoded requests and
# answers through each dialect's reply sink.
forbid_name server/net/tcpstore_wire.c '\bc10ds_(conn|engine|readiness|listener)_[a-z_]+\(' \
    "TCPStore's wire (tcpstore_wire.c) knows no connection and no engine"
forbid_name "server/*.c server/*/*.c" '\bc10dpb__(request__pack|reply__unpack)\(' \
    "the coordinator decodes requests and encodes replies, never the other way round"
# Time (docs/architecture.md, "Time"): inside both programs a duration
# is a c10d_ms, already resolved (0: no wait); a plain int of milliseconds
# is the public API's, whose 0 means "the default", and appears only in
# the definitions of the API's own functions and in c10di_timeout, the
# edge that converts it. A declaration is the line that names it or the
# two before (a wrapped parameter list).
ms_hits=$(for f in client/src/*.[ch] client/src/*/*.[ch] server/*.[ch] server/*/*.[ch] \
                   common/*.[ch]; do
    awk -v f="$f" '
        { prev2 = prev1; prev1 = cur; cur = $0 }
        /^[[:space:]]*(\/?\*|\/\/)/ { next }
        /(^|[^a-z_])int [a-z_]+_ms([^a-z_(]|$)/ {
            ctx = prev2 "\n" prev1 "\n" cur
            if (ctx ~ /(^|\n)c10d_status (c10d_[a-z_]+|c10di_timeout)\(/) next
            print f ":" NR ": " $0
        }' "$f"
done)
if [ -n "$ms_hits" ]; then
    echo "layering: a duration inside is a c10d_ms (common/c10d_time.h), not an int:"
    echo "$ms_hits" | sed 's/^/  /'
    bad=1
fi
# Every file a rule names must exist: a rule about a file that moved would
# pass by checking nothing.
for f in server/net/readiness.c server/net/framing.c server/net/connection.c \
         server/net/tcpstore_wire.c \
         client/src/conn/conn_stream.c client/src/conn/conn_reader.c client/src/conn/conn_dial.c \
         client/src/conn/conn_stream_internal.h client/src/coll/verify.c client/src/join/join_region.c \
         client/src/group/liveness.c client/src/backend/backend.h client/src/internal.h; do
    if [ ! -f "$f" ]; then
        echo "layering: $f, named by a rule here, does not exist (moved? update the rule)"
        bad=1
    fi
done
for d in server/net server/engine server/db server/store server/groups server/verify server/join \
         server/replica client/src/conn client/src/coll client/src/group client/src/join \
         client/src/store client/src/backend client/src/host client/src/nccl client/src/external; do
    if ! ls "$d"/*.[ch] >/dev/null 2>&1; then
        echo "layering: $d, named by a rule here, holds no source (moved? update the rule)"
        bad=1
    fi
done
if [ "$bad" = 0 ]; then
    echo "layering: every include is where docs/architecture.md allows it"
fi
exit "$bad"
