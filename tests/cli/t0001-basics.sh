#!/bin/sh
# t0001: --version, --help, usage errors and their exit codes.
. "$TOP/tests/cli/lib.sh"

run "$KVCHAT" --version
expect_rc 0; expect_out '^kvchat [0-9][0-9.]*$'

run "$KVCHAT" --help
expect_rc 0; expect_out 'usage: kvchat'; expect_out 'models'

# no command means chat; with no model configured it says how to get one
run "$KVCHAT" </dev/null
expect_rc 2; expect_out_empty; expect_err 'no model configured'; expect_err 'kvchat models pull qwen2.5:0.5b'

run "$KVCHAT" frobnicate
expect_rc 1; expect_out_empty; expect_err "kvchat: unknown command 'frobnicate'"

run "$KVCHAT" --frobnicate
expect_rc 1; expect_out_empty; expect_err "kvchat: unknown option '--frobnicate'"

run "$KVCHAT" models --help
expect_rc 0; expect_out 'usage: kvchat models \[list\]'; expect_out 'kvchat models pull'; expect_out 'kvchat models add'

run "$KVCHAT" models info --help
expect_rc 0; expect_out 'kvchat models info \[--json\]'

run "$KVCHAT" models info --bogus x.gguf
expect_rc 1; expect_out_empty; expect_err "unknown option '--bogus'"

run "$KVCHAT" models info
expect_rc 1; expect_out_empty; expect_err 'expected one MODEL'

run "$KVCHAT" models frob
expect_rc 1; expect_err "unknown subcommand 'frob'"

finish
