# repl-lib.sh - shared by the REPL tests (tests/cli/t05*-repl-*.sh), after
# lib.sh: a synthetic Qwen2-shaped model with the real Qwen2 vocabulary and
# ChatML template, and `drive`, which runs kvchat on a pseudo-terminal
# (tests/cli/ptydrive.py) following a script on stdin.
export TERM=xterm LC_ALL=C.UTF-8
unset COLUMNS LINES
M="$T/m.gguf"
qwen2_tiny "$M" --seed 2 --scale 4 || { echo "mkmodel failed"; exit 1; }
# one thread: steady on a loaded machine
K="$KVCHAT -m $M -t 1"
n_drive=0

# drive NAME [--cols N] ARGS... < SCRIPT: kvchat ARGS on a pty (N columns
# wide, default 200); answers of `say` go to $T/NAME/<name>, the transcript
# to $T/NAME.log, the raw bytes to $T/NAME.raw
drive() {
    name=$1 cols=200
    shift
    if [ "$1" = --cols ]; then
        cols=$2
        shift 2
    fi
    n_drive=$((n_drive + 1))
    mkdir -p "$T/$name"
    if python3 "$TOP/tests/cli/ptydrive.py" --timeout 120 --cols "$cols" --dir "$T/$name" --log "$T/$name.log" \
        --raw "$T/$name.raw" -- "$@" >"$T/$name.drv" 2>&1; then
        ok "$name: the session went as scripted"
    else
        not_ok "$name: the session did not go as scripted"
        sed 's/^/  /' "$T/$name.drv"
        echo "  transcript:"
        sed 's/^/  | /' "$T/$name.log" 2>/dev/null
    fi
}

# stat FILE KEY: a number from the [prefilled N · reused N · generated N ...] line in FILE
stat_of() {
    sed -n "s/.*\[prefilled \([0-9]*\) · reused \([0-9]*\) · generated \([0-9]*\) .*/\1 \2 \3/p" "$1" |
        tail -n 1 | {
        read -r p r g || { echo -1; return; }
        case $2 in prefilled) echo "$p" ;; reused) echo "$r" ;; generated) echo "$g" ;; esac
    }
}

expect_eq() { # what got wanted
    [ "$2" = "$3" ] && ok "$1: $2" || not_ok "$1: got '$2', wanted '$3'"
}

expect_same_file() { # what a b
    if cmp -s "$2" "$3"; then
        ok "$1"
    else
        not_ok "$1"
        echo "  --- $2"; sed 's/^/  | /' "$2"; echo "  --- $3"; sed 's/^/  | /' "$3"
    fi
}
