# Sourced by the bench scripts that drive one `tpserve serve` with its OpenAI gateway.
# serve_with_gateway LOG [tpserve serve options...]: starts `$BUILD/client/tpserve serve` on ports PORT (ZeroMQ),
# PORT + 1 (workers) and PORT + 2 (HTTP) with the given options, output in LOG; sets SERVE_PID; returns once
# the gateway answers /health (exits 1 with the log if the server dies first). The caller's EXIT trap calls
# stop_server.
SERVE_PID=
serve_with_gateway() {
  local log=$1
  shift
  "$BUILD/client/tpserve" serve --port "$PORT" --worker-port $((PORT + 1)) --http-port $((PORT + 2)) "$@" \
    >"$log" 2>&1 &
  SERVE_PID=$!
  for _ in $(seq 120); do
    curl -sf "http://127.0.0.1:$((PORT + 2))/health" >/dev/null && return 0
    kill -0 "$SERVE_PID" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 1
  done
  echo "tpserve serve: the gateway never answered /health (log: $log)" >&2
  exit 1
}

# gateway_target zmq|http: sets url (the server's ZeroMQ endpoint or its gateway) and extra (tpserve-bench's
# options for it: the gateway does not report the vocabulary, VOCAB, default SmolLM2's 49152).
gateway_target() {
  if [ "$1" = zmq ]; then
    url=tcp://127.0.0.1:$PORT
    extra=()
  else
    url=http://127.0.0.1:$((PORT + 2))
    extra=(--vocab-size "${VOCAB:-49152}")
  fi
}

stop_server() {
  kill "$SERVE_PID" 2>/dev/null
  wait "$SERVE_PID" 2>/dev/null || true
}
