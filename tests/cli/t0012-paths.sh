#!/bin/sh
# t0012: the path variables - an empty KVCHAT_HOME is an error, not the
# default; a variable longer than the checked limit (PATH_MAX less room for
# kvchat's own names) is refused by name; a home longer than SQLite can
# open a database under (494 bytes, after symbolic links) is refused with
# that reason, and one of exactly 494 bytes works, sessions and all.
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
qwen2_tiny "$M" || exit 1
R="$KVCHAT run -m $M -t 1 --temp 0 -n 4"
# the defaults under a HOME of the test's own, never the user's
export HOME="$T/fakehome"
unset XDG_DATA_HOME

# longdir N: a directory path of exactly N bytes under $T (made, unless N
# is more than PATH_MAX allows), printed
longdir() {
    python3 - "$T/long" "$1" <<'PY'
import os, sys
base, n = sys.argv[1], int(sys.argv[2])
d, rest = base, n - len(base)
while rest > 0:
    k = min(200, rest - 1)
    if rest - k - 1 == 1:
        k -= 1
    d += "/" + "d" * k
    rest -= k + 1
assert len(d) == n
if n < 4000:
    os.makedirs(d, exist_ok=True)
print(d)
PY
}

# ---- an empty KVCHAT_HOME
for cmd in "run -m $M hi" "sessions list" "models list" "chat -m $M" "models path"; do
    run env KVCHAT_HOME= $KVCHAT $cmd </dev/null
    expect_rc 1; expect_out_empty; expect_err "KVCHAT_HOME is set but empty"
done
[ ! -e "$HOME/.local/share/kvchat" ] && ok "the default home is not touched" || not_ok "the default home was used"
run env KVCHAT_HOME= $KVCHAT --version
expect_rc 0; expect_out "kvchat "
run env KVCHAT_HOME= $KVCHAT run --help
expect_rc 0; expect_out "usage: kvchat run"
# an empty XDG variable or HOME is unset, as the XDG specification says
run env KVCHAT_HOME= XDG_DATA_HOME="$T/xdg" $KVCHAT models list
expect_rc 1; expect_err "KVCHAT_HOME is set but empty"
run env -u KVCHAT_HOME XDG_DATA_HOME= HOME="$T/h" $KVCHAT run -m $M -t 1 -n 2 -s x hi </dev/null
expect_rc 0
[ -f "$T/h/.local/share/kvchat/kvchat.db" ] && ok "empty XDG_DATA_HOME: \$HOME/.local/share/kvchat" ||
    not_ok "empty XDG_DATA_HOME: no database under \$HOME/.local/share/kvchat"

# ---- too long: refused by name, never taken for unset
big=$(longdir 5000)
for v in KVCHAT_HOME XDG_DATA_HOME XDG_CONFIG_HOME XDG_STATE_HOME HOME; do
    run env $v="$big" $KVCHAT run -m $M -t 1 -n 2 -s x hi </dev/null
    expect_rc 1; expect_err "kvchat: $v is too long: 5000 bytes, more than the [0-9]* kvchat takes"
    grep -q "unset\|set KVCHAT_HOME or HOME" "$T/err" && not_ok "$v: said to be unset" || ok "$v: not said to be unset"
done

# ---- SQLite's limit: 494 bytes work, 495 and longer are refused with the reason
h=$(longdir 494)
run env KVCHAT_HOME="$h" $R -s q hi </dev/null
expect_rc 0
run env KVCHAT_HOME="$h" $R --json -s q again </dev/null
expect_rc 0
[ "$(jq -r .cached_tokens "$T/out")" -gt 0 ] && ok "a 494-byte home: the session resumes from its KV" ||
    not_ok "a 494-byte home: no resume"
[ -f "$h/kvchat.db" ] && ok "the database is in the 494-byte home" || not_ok "no database in the 494-byte home"
for n in 495 700 1000; do
    h=$(longdir $n)
    run env KVCHAT_HOME="$h" $R -s q hi </dev/null
    expect_rc 3; expect_out_empty
    expect_err "its path is $n bytes long, and SQLite opens no database under a directory longer than 494"
    grep -q "unable to open database file" "$T/err" && not_ok "$n: SQLite's bare message" || ok "$n: a reason, not SQLite's bare message"
    run env KVCHAT_HOME="$h" $KVCHAT sessions list
    expect_rc 3; expect_err "SQLite opens no database under a directory longer than 494"
    run sh -c "echo hi | KVCHAT_HOME='$h' $KVCHAT chat -m $M -t 1 -n 2 q"
    expect_rc 3; expect_err "SQLite opens no database under a directory longer than 494"
done
# what counts is the real path: a short symbolic link to a long directory too
ln -s "$(longdir 600)" "$T/short"
run env KVCHAT_HOME="$T/short" $R -s q hi </dev/null
expect_rc 3; expect_err "its path is 600 bytes long"
# the store of models does not need SQLite: it works in a long home
run env KVCHAT_HOME="$(longdir 1000)" $KVCHAT models list
expect_rc 0
# a relative home is taken from the working directory
mkdir -p "$T/cwd"
run sh -c "cd '$T/cwd' && KVCHAT_HOME=rel $R -s q hi < /dev/null"
expect_rc 0
[ -f "$T/cwd/rel/kvchat.db" ] && ok "a relative KVCHAT_HOME" || not_ok "a relative KVCHAT_HOME"
finish
