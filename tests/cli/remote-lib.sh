# remote-lib.sh - for the CLI tests of remote models: start_fixture runs
# tests/cli/chatserver.py (a chat-completions protocol fixture on
# 127.0.0.1) under $T, stopped on exit with the others in $PIDS. Source
# after lib.sh and tls-lib.sh.

# start_fixture NAME ARGS...: a fixture logging to $T/NAME.log; its port in $PORT
start_fixture() {
    name=$1
    shift
    python3 "$TOP/tests/cli/chatserver.py" --port-file "$T/$name.port" --log "$T/$name.log" "$@" &
    PIDS="$PIDS $!"
    i=0
    while [ ! -s "$T/$name.port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    PORT=$(cat "$T/$name.port")
}

# add NAME MODEL [options]: a remote model NAME for the fixture at $P serving MODEL
add() {
    n=$1 m=$2
    shift 2
    "$KVCHAT" models add-remote --force "$n" "http://127.0.0.1:$P/v1" --model "$m" "$@" 2>/dev/null ||
        not_ok "cannot add $n"
}
# last_body: the last request's body that the fixture logged to $T/srv.log, as JSON
last_body() { tail -n 1 "$T/srv.log" | jq -c .body; }
