#!/usr/bin/env bash
# docs/operations.md's throwaway-CA recipe, run as written (the first sh
# block under "A throwaway CA, step by step"), then a real c10d-coord
# serving tls+tcp:// with what it made and c10d-ctl trusting its CA.
#   test_tls_recipe.sh SOURCE_DIR C10D_COORD C10D_CTL
set -uo pipefail
src=$1 coord=$2 ctl=$3
out=$(mktemp -d)
cpid=
trap '[ -n "$cpid" ] && kill "$cpid" 2>/dev/null; rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; for f in "$out"/*.log; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }
command -v openssl >/dev/null || { echo "skipped: no openssl"; exit 77; }

awk '/^### A throwaway CA, step by step/{on=1} on && /^```sh$/{in_=1; next}
     in_ && /^```$/{exit} in_' "$src/docs/operations.md" >"$out/recipe.sh"
grep -q "openssl x509 -req" "$out/recipe.sh" || fail "no recipe found in docs/operations.md"
(cd "$out" && HOST=127.0.0.1 bash -e recipe.sh >"$out/recipe.log" 2>&1) || fail "the recipe failed"
for f in ca.pem server.pem server.key; do [ -s "$out/$f" ] || fail "the recipe made no $f"; done

"$coord" --listen "tls+tcp://127.0.0.1:0" --tls-cert "$out/server.pem" --tls-key "$out/server.key" \
    --db :memory: --ready-file "$out/ready" >"$out/coord.log" 2>&1 &
cpid=$!
for _ in $(seq 200); do [ -s "$out/ready" ] && break; kill -0 "$cpid" 2>/dev/null || break; sleep 0.05; done
[ -s "$out/ready" ] || fail "the coordinator did not start on the recipe's certificate"
url=$(head -1 "$out/ready")
"$ctl" --coord "$url" --tls-ca "$out/ca.pem" status >"$out/ctl.log" 2>&1 ||
    fail "c10d-ctl with the recipe's CA could not ask the coordinator"
grep -q "^coordinator  tls+tcp://127.0.0.1" "$out/ctl.log" || fail "unexpected status output"
"$ctl" --coord "$url" -t 2000 status >"$out/noca.log" 2>&1
[ $? = 6 ] || fail "a client without the CA was not refused (6)"
echo "tls recipe: ok"
