#!/bin/sh
# t0800: shell completion - the hidden `kvchat __complete` (commands,
# subcommands, options, option values, session and model names; it creates
# nothing), the bash script (complete -p, then _kvchat on prepared lines,
# names with colons), bash and zsh completing on a real terminal, every
# option offered appearing in the command's --help and every --help option
# offered, and `make install` putting both scripts under DESTDIR and PREFIX.
. "$TOP/tests/cli/lib.sh"
: "${MKSESSION:?}"
BASH_SCRIPT=$TOP/cli/completion/kvchat.bash
ZSH_DIR=$TOP/cli/completion
C() { "$KVCHAT" __complete "$@" 2>&1 | cut -f1 | tr '\n' ' ' | sed 's/ $//'; }
expect_eq() { [ "$2" = "$3" ] && ok "$1: $2" || not_ok "$1: got '$2', wanted '$3'"; }
expect_words() { # what, got, wanted (all words of wanted, in any order, and nothing else)
    g=$(printf '%s\n' $2 | sort | tr '\n' ' ') w=$(printf '%s\n' $3 | sort | tr '\n' ' ')
    [ "$g" = "$w" ] && ok "$1: $3" || not_ok "$1: got '$2', wanted '$3'"
}

# ---- nothing saved yet: no names, and nothing is created by asking
expect_words "commands" "$(C "")" "chat models run sessions tokenize template eval generate bench paths help"
expect_words "no sessions, no models" "$(C sessions show "")" ""
expect_words "no models" "$(C models rm "")" ""
[ ! -e "$KVCHAT_HOME" ] && ok "__complete created nothing" || not_ok "__complete created $(ls -R "$KVCHAT_HOME")"

mkdir -p "$KVCHAT_HOME/models"
"$MKMODEL" "$KVCHAT_HOME/models/tiny.gguf" --dim 64 --heads 4 --kv-heads 2 --layers 1 --ff 128 >/dev/null || exit 1
cp "$KVCHAT_HOME/models/tiny.gguf" "$KVCHAT_HOME/models/qw:small.gguf"
"$MKSESSION" "$KVCHAT_HOME" trip --turns 1 >/dev/null || exit 1
"$MKSESSION" "$KVCHAT_HOME" travel --turns 1 >/dev/null || exit 1
"$MKSESSION" "$KVCHAT_HOME" work --turns 1 >/dev/null || exit 1

expect_words "kvchat t" "$(C t)" "tokenize template travel trip"
expect_words "models subcommands" "$(C models "")" "list ls add add-remote pull rm default info aliases path"
expect_words "sessions subcommands" "$(C sessions "")" "list ls show rm rename fork export gc search"
expect_words "sessions show: names" "$(C sessions show "")" "trip travel work"
expect_words "sessions show tr" "$(C sessions show tr)" "trip travel"
expect_words "sessions show takes one" "$(C sessions show trip "")" ""
expect_words "sessions rm takes many" "$(C sessions rm trip "")" "trip travel work"
expect_words "sessions rename: only the first is a session" "$(C sessions rename trip "")" ""
expect_words "models rm: store names" "$(C models rm "")" "qw:small tiny"
expect_words "models info: names and files" "$(C models info "")" "qw:small tiny :files"
expect_words "models add: files" "$(C models add "")" ":files"
expect_words "models pull: aliases" "$(C models pull qwen2.5:)" "qwen2.5:0.5b qwen2.5:1.5b qwen2.5:3b"
expect_words "-m: names and files" "$(C run -m "")" "qw:small tiny :files"
expect_words "--model: the same" "$(C -t 2 --model "")" "qw:small tiny :files"
expect_words "-s: sessions" "$(C run -s w)" "work"
expect_words "--kv-type" "$(C chat --kv-type "")" "f16 f32"
expect_words "--think" "$(C run --think "")" "on off show hide"
expect_words "--format" "$(C sessions export trip --format "")" "json markdown"
expect_words "--template: the names template --list gives" "$(C run --template "")" "$("$KVCHAT" template --list | cut -d' ' -f1)"
expect_words "an option's value is not a session" "$(C -n 5 "")" "$(C "")"
expect_words "kvchat NAME -x: the chat's options" "$(C trip --no-)" "--no-cache --no-private --no-wrap"
expect_words "help COMMAND" "$(C help se)" "sessions"
expect_words "after --, no options" "$(C run -- -)" ""
expect_words "an unknown subcommand: nothing" "$(C models frob "")" ""
has_words() { # what, got, words that must be among them
    for x in $3; do
        case " $2 " in *" $x "*) ;; *) not_ok "$1: no '$x' in '$2'"; return ;; esac
    done
    ok "$1: $3"
}
has_words "run's own options" "$(C run --)" "--json --file --session"
has_words "the common options" "$(C chat -)" "--no-wrap --system-file -m --temp"

# ---- every option offered is in the command's --help, and the other way
# round (for models and sessions, over all their subcommands)
for cmd in chat run models sessions tokenize template eval generate bench; do
    offered=$(
        {
            "$KVCHAT" __complete "$cmd" -
            for sub in $("$KVCHAT" __complete "$cmd" "" | cut -f1); do
                [ "$cmd" = models ] || [ "$cmd" = sessions ] && "$KVCHAT" __complete "$cmd" "$sub" -
            done
        } | cut -f1 | grep '^--' | grep -v '^--help$' | sort -u | tr '\n' ' '
    )
    documented=$("$KVCHAT" "$cmd" --help | grep -o -- '--[a-z][a-z0-9-]*' | grep -v '^--help$' | sort -u | tr '\n' ' ')
    [ "$offered" = "$documented" ] && ok "$cmd: completion offers the options --help lists" ||
        not_ok "$cmd: offered '$offered', documented '$documented'"
    for s in $("$KVCHAT" __complete "$cmd" - | cut -f1 | grep '^-[a-zA-Z]$' | grep -v '^-h$'); do
        "$KVCHAT" "$cmd" --help | grep -q -- "$s[ ,]" || not_ok "$cmd: $s offered, not in --help"
    done
done

# ---- bash: the script registers itself; _kvchat on prepared lines
out=$(bash --norc --noprofile -c ". '$BASH_SCRIPT' && complete -p kvchat")
expect_eq "complete -p kvchat" "$out" "complete -F _kvchat kvchat"
bash_complete() { # LINE: what _kvchat puts in COMPREPLY (sorted)
    PATH="$(dirname "$KVCHAT"):$PATH" bash --norc --noprofile -c '
        . "$1"
        COMP_LINE=$2; COMP_POINT=${#2}
        read -ra COMP_WORDS <<<"$2"; COMP_CWORD=${#COMP_WORDS[@]}
        _kvchat
        printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "' sh "$BASH_SCRIPT" "$1" | sed 's/ $//'
}
ln -sf "$KVCHAT" "$T/kvchat" # as `kvchat` on PATH
KVCHAT=$T/kvchat
expect_eq "bash: kvchat ses" "$(bash_complete 'kvchat ses')" "sessions"
expect_eq "bash: sessions show t" "$(bash_complete 'kvchat sessions show t')" "travel trip"
expect_eq "bash: models rm" "$(bash_complete 'kvchat models rm ')" "qw:small tiny"
# bash breaks words at ':': the candidates are what follows it
expect_eq "bash: a name with a colon" "$(bash_complete 'kvchat models rm qw:')" "small"
expect_eq "bash: an alias with a colon" "$(bash_complete 'kvchat models pull qwen2.5:0')" "0.5b"
mkdir -p "$T/files" && : >"$T/files/notes.txt" && : >"$T/files/nope.md"
expect_eq "bash: file names after -f" "$(bash_complete "kvchat run -f $T/files/no")" "$T/files/nope.md $T/files/notes.txt"
expect_eq "bash: --kv-type" "$(bash_complete 'kvchat run --kv-type f1')" "f16"

# ---- bash and zsh on a terminal, as a user presses Tab
export TERM=xterm
PATH="$T:$PATH"
# the keys a user types in either shell, after SETUP (which sets PROMPT)
tab_keys() { # SETUP PROMPT
    cat <<EOF
sleep 0.3
line $1
expect $2
send kvchat sessions show tri\t
expect show trip
send \x15
send kvchat models rm qw\t
expect rm qw:small
send \x15
send kvchat models pu\t
expect models pull
send \x15
send kvchat run --kv\t
expect run --kv-type
send \x15
line exit
exit 0
EOF
}
on_terminal() { # SHELL SETUP SHELL-COMMAND...
    sh=$1 setup=$2
    shift 2
    tab_keys "$setup" "$sh> " >"$T/$sh.script"
    if python3 "$TOP/tests/cli/ptydrive.py" --timeout 20 --log "$T/$sh.log" -- "$@" <"$T/$sh.script" >"$T/$sh.drv" 2>&1; then
        ok "$sh on a terminal: sessions, models with a colon, subcommands, options"
    else
        not_ok "$sh on a terminal"
        sed 's/^/  /' "$T/$sh.drv"
    fi
}
on_terminal bash "PS1='bash> '; . $BASH_SCRIPT" bash --norc --noprofile -i
on_terminal zsh "PS1='zsh> '; fpath=($ZSH_DIR \$fpath); autoload -U compinit; compinit -u -D" zsh -f -i

# ---- make install puts both scripts under DESTDIR and PREFIX; uninstall removes them
D=$T/dest
if make -s -C "$TOP" install DESTDIR="$D" PREFIX=/opt/kv >"$T/install.log" 2>&1; then
    cmp -s "$D/opt/kv/share/bash-completion/completions/kvchat" "$BASH_SCRIPT" &&
        cmp -s "$D/opt/kv/share/zsh/site-functions/_kvchat" "$ZSH_DIR/_kvchat" &&
        ok "make install: the bash and zsh scripts under DESTDIR/PREFIX" ||
        not_ok "make install: $(find "$D" -type f)"
    make -s -C "$TOP" uninstall DESTDIR="$D" PREFIX=/opt/kv >>"$T/install.log" 2>&1
    [ -z "$(find "$D" -type f)" ] && ok "make uninstall removes them" || not_ok "left: $(find "$D" -type f)"
    make -s -C "$TOP" install DESTDIR="$D" prefix=/usr datarootdir=/usr/share2 >>"$T/install.log" 2>&1
    [ -f "$D/usr/share2/bash-completion/completions/kvchat" ] && [ -f "$D/usr/share2/zsh/site-functions/_kvchat" ] &&
        ok "make install prefix= datarootdir=: the scripts follow" || not_ok "prefix=: $(find "$D" -type f)"
else
    not_ok "make install failed"; sed 's/^/  /' "$T/install.log"
fi
finish
