#!/usr/bin/env bash
# deploy/ssh-job.sh end to end, its ssh a stand-in that records its
# arguments and runs the command here: a real coordinator with a token,
# two ranks of the training example that need the token to take part, and
# the token never on a command line: `ps` would show it.
set -uo pipefail
src=$1 bindir_coord=$2 bindir_ctl=$3 train=$4
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; for f in "$out"/*.log "$out"/*.err; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }

mkdir -p "$out/bin"
cat >"$out/bin/ssh" <<EOS
#!/usr/bin/env bash
# ssh HOST WORDS...: what ps would show of ssh, then the remote side, here
printf '%s\n' "\$*" >>"$out/ssh-argv.log"
shift
exec bash -c "\$*"
EOS
chmod +x "$out/bin/ssh"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])')
token="tok-$RANDOM-$RANDOM-secret"
(cd "$out" && PATH="$out/bin:$bindir_coord:$bindir_ctl:$PATH" C10D_PORT=$port C10D_JOB=sshjob \
    C10D_TOKEN=$token bash "$src/deploy/ssh-job.sh" "hostA hostB" 1 "$train" 50 \
    >"$out/job.log" 2>"$out/job.err") || fail "the job failed"
grep -q "weights identical on 2 of 2 ranks" "$out/job.log" || fail "no agreement line"
[ "$(wc -l <"$out/ssh-argv.log")" = 2 ] || fail "expected 2 ssh calls"
grep -q -- "$token" "$out/ssh-argv.log" && fail "the token is on ssh's command line"
grep -q "RANK=1" "$out/ssh-argv.log" || fail "the ranks' environment is not on the command line"
# The coordinator took C10D_TOKEN from the environment, so a rank without
# it would have been refused (C10D_EAUTH) and the job failed.
grep -q "job sshjob" "$out/job.log" || fail "the script's closing status did not show the job"
echo "deploy ssh: ok"
