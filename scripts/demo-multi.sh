#!/usr/bin/env bash
# A local multi-instance gemforge, started by one command:
#
#   npm run demo:multi                  # runs until Ctrl-C (or SIGTERM)
#   npm run demo:multi -- --check       # or DEMO_CHECK=1: start, smoke-check through nginx, stop; exit 0/1
#   DEMO_PORT=9090 npm run demo:multi   # nginx's port (default 8080)
#
# What runs, all on 127.0.0.1 and all in one temp directory:
# - a throw-away Postgres cluster (scripts/ci-postgres.sh: Debian's postgresql,
#   installed when missing and root), the one database every process shares;
# - an S3-compatible server (s3rver from npm, scripts/demo/s3.ts), the one bucket;
# - two APIs (WORKER_ENABLED=false) with their own DATA_DIRs and one SIGNING_SECRET;
# - two media workers (`gemforge worker`);
# - nginx (Debian's package, installed when missing and root) balancing the two
#   APIs, with the proxy settings this API needs (see write_nginx_conf).
# Ctrl-C or SIGTERM stops everything (APIs and workers drain first) and removes
# the temp directory; the Postgres holder also stops if this script is killed.
set -euo pipefail
cd "$(dirname "$0")/.."

CHECK="${DEMO_CHECK:-0}"
[[ "${1:-}" == "--check" ]] && CHECK=1
PORT="${DEMO_PORT:-8080}"
NODE="$PWD/node_modules/.bin/node"
[[ -x "$NODE" ]] || NODE="$(command -v node)"
BUCKET=gemforge-demo

say() { echo "demo: $*" >&2; }

find_nginx() { command -v nginx || { [[ -x /usr/sbin/nginx ]] && echo /usr/sbin/nginx; } || true; }
NGINX="$(find_nginx)"
if [[ -z "$NGINX" ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    say "nginx is not installed and this is not root to install it (apt-get install nginx)"
    exit 2
  fi
  say "installing Debian's nginx"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq nginx >/dev/null
  NGINX="$(find_nginx)"
fi

free_port() { "$NODE" -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"; }

WORK="$(mktemp -d /tmp/gemforge-demo.XXXXXX)"
PIDS=()
STOPPING=0
cleanup() {
  [[ $STOPPING -eq 1 ]] && return
  STOPPING=1
  say "stopping"
  # nginx first (no new requests), then the APIs and workers drain, then S3 and Postgres.
  [[ -f "$WORK/nginx.pid" ]] && kill -QUIT "$(cat "$WORK/nginx.pid")" 2>/dev/null || true
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill -TERM "${PIDS[i]}" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  touch "$WORK/stop-postgres"
  [[ -n "${PG_HOLDER:-}" ]] && wait "$PG_HOLDER" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Postgres: scripts/ci-postgres.sh runs a holder that writes the cluster's URL and
# waits until this script asks it to stop (or is gone); it then removes the cluster.
DEMO_PID=$$
scripts/ci-postgres.sh bash -c 'echo "$TEST_DATABASE_URL" > "$0/pg-url"; while kill -0 "$1" 2>/dev/null && [[ ! -e "$0/stop-postgres" ]]; do sleep 0.3; done' "$WORK" "$DEMO_PID" >"$WORK/postgres.log" 2>&1 &
PG_HOLDER=$!
for _ in $(seq 1 600); do [[ -s "$WORK/pg-url" ]] && break; kill -0 "$PG_HOLDER" 2>/dev/null || break; sleep 0.2; done
if [[ ! -s "$WORK/pg-url" ]]; then say "Postgres did not start:"; cat "$WORK/postgres.log" >&2; exit 1; fi
export DATABASE_URL="$(cat "$WORK/pg-url")"

# The S3 server, and what every process needs to use it.
S3_PORT="$(free_port)"
"$NODE" --import tsx scripts/demo/s3.ts "$S3_PORT" "$BUCKET" "$WORK/s3" >"$WORK/s3.log" 2>&1 &
PIDS+=($!)
export BLOB_STORE=s3 S3_ENDPOINT="http://127.0.0.1:$S3_PORT" S3_BUCKET="$BUCKET" S3_FORCE_PATH_STYLE=true S3_REGION=us-east-1
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
export SIGNING_SECRET="$("$NODE" -e "console.log(require('crypto').randomBytes(32).toString('hex'))")"
export PUBLIC_BASE_URL="http://127.0.0.1:$PORT" TRUST_PROXY=loopback LOG_LEVEL="${LOG_LEVEL:-info}"
for _ in $(seq 1 100); do grep -q s3rver "$WORK/s3.log" 2>/dev/null && break; sleep 0.1; done

wait_ready() { # URL NAME LOG
  for _ in $(seq 1 600); do
    curl -fsS "$1/readyz" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  say "$2 did not become ready; its log:"; tail -n 30 "$3" >&2; return 1
}

# Two APIs, started one after the other (the first runs the migrations), then two workers.
API_PORTS=()
for n in 1 2; do
  p="$(free_port)"; API_PORTS+=("$p")
  mkdir -p "$WORK/api$n"
  DATA_DIR="$WORK/api$n" PORT="$p" HOST=127.0.0.1 WORKER_ENABLED=false SHUTDOWN_READINESS_DELAY_SECONDS=0 \
    "$NODE" --max-semi-space-size=16 --heap-growing-percent=50 --expose-gc --import tsx server/main.ts >"$WORK/api$n.log" 2>&1 &
  PIDS+=($!)
  wait_ready "http://127.0.0.1:$p" "API $n" "$WORK/api$n.log"
done
for n in 1 2; do
  mkdir -p "$WORK/worker$n"
  DATA_DIR="$WORK/worker$n" "$NODE" scripts/gemforge.mjs worker >"$WORK/worker$n.log" 2>&1 &
  PIDS+=($!)
done

write_nginx_conf() {
  mkdir -p "$WORK/nginx"
  cat >"$WORK/nginx/nginx.conf" <<CONF
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log warn;
events { worker_connections 512; }
http {
  log_format upstream '\$remote_addr "\$request" \$status upstream=\$upstream_addr';
  access_log $WORK/nginx-access.log upstream;
  client_body_temp_path $WORK/nginx/body;
  proxy_temp_path $WORK/nginx/proxy;
  fastcgi_temp_path $WORK/nginx/fastcgi;
  uwsgi_temp_path $WORK/nginx/uwsgi;
  scgi_temp_path $WORK/nginx/scgi;
  upstream gemforge {
    # Passive health checks (open-source nginx has no active ones): an API that
    # refuses connections is left out for 5 s. A draining API answers new work
    # 503 with Connection: close, and the client retries the same identity.
    server 127.0.0.1:${API_PORTS[0]} max_fails=1 fail_timeout=5s;
    server 127.0.0.1:${API_PORTS[1]} max_fails=1 fail_timeout=5s;
    keepalive 32;
  }
  server {
    listen 127.0.0.1:$PORT;
    # Voice uploads take up to 50 MiB, asset uploads 30 MiB: the APIs enforce their own limits.
    client_max_body_size 64m;
    location / {
      proxy_pass http://gemforge;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host \$http_host;
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
      # Chat completions stream (SSE): pass each frame on at once.
      proxy_buffering off;
      # Uploads stream to the API as they arrive (it counts and limits them itself).
      proxy_request_buffering off;
      # A long generation or download is not cut by the proxy.
      proxy_read_timeout 900s;
      proxy_send_timeout 900s;
      add_header X-Gemforge-Upstream \$upstream_addr always;
    }
  }
}
CONF
}
write_nginx_conf
"$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -g 'daemon off;' >"$WORK/nginx.log" 2>&1 &
PIDS+=($!)
wait_ready "http://127.0.0.1:$PORT" nginx "$WORK/nginx-error.log"

# An account with Gems and a key with both scopes, through the operator's CLI.
json_field() { "$NODE" -e "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{const f=(o)=>o&&typeof o==='object'?(o['$1']??Object.values(o).map(f).find(Boolean)):undefined;console.log(f(JSON.parse(s))??'')})"; }
ADMIN=(env DATA_DIR="$WORK/api1" LOG_LEVEL=silent "$NODE" scripts/gemforge.mjs admin)
ACCOUNT="$("${ADMIN[@]}" account create --name demo --gems 10000 | json_field id)"
KEY="$("${ADMIN[@]}" key create --account "$ACCOUNT" --name demo --scopes read,generate | json_field secret)"

BASE="http://127.0.0.1:$PORT"
if [[ "$CHECK" == 1 ]]; then
  say "checking through $BASE"
  "$NODE" --import tsx scripts/demo/check.ts "$BASE" "$KEY"
  exit $?
fi

cat <<INFO

gemforge multi-instance demo
  base URL   $BASE   (nginx → APIs on 127.0.0.1:${API_PORTS[0]} and :${API_PORTS[1]}; header X-Gemforge-Upstream names the one that answered)
  API key    $KEY   (account $ACCOUNT: 10000 Gems, scopes read and generate)
  database   $DATABASE_URL
  bucket     s3://$BUCKET at $S3_ENDPOINT
  logs       $WORK/*.log   (removed at stop)

  curl -s -X POST $BASE/api/generate/image -H "Authorization: Bearer $KEY" \\
    -H 'Content-Type: application/json' -H "Idempotency-Key: \$(uuidgen || date +%s%N)" \\
    -d '{"model":"gemforge-image-1","prompt":"a lighthouse","parameters":{"resolution":"512"}}'
  curl -s $BASE/api/generate/tasks/TASK_ID -H "Authorization: Bearer $KEY"
  OPENAI_BASE_URL=$BASE/api/generate/text/v1 OPENAI_API_KEY=$KEY   # for OpenAI-compatible clients

Ctrl-C stops everything.
INFO
# Until a signal, or until a process dies.
while true; do
  for pid in "${PIDS[@]}"; do
    if ! kill -0 "$pid" 2>/dev/null; then say "a process ($pid) exited; stopping"; exit 1; fi
  done
  sleep 1
done
