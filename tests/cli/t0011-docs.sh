#!/bin/sh
# t0011: the documentation says what the program does - `kvchat --help`
# names every models and sessions subcommand, `run --help` every key of `run --json`,
# the chat's /help every /set key (t0503); kvchat.1's examples use names
# that exist, it describes every sessions subcommand, and it has no stale
# "later" about what KVCHAT_HOME holds. Issue 29's docs items: /help's
# commands each in kvchat.1 and README, and what /help, kvchat.1 and README
# say of /undo, /retry, /clear, /load, /exit the same; the prefix rule of
# chat --help and kvchat.1 is the program's; every on/off option --X has
# --no-X and --no-no-X is refused; exit 6 (a full context) is documented;
# /show, chat --help and README say what an unnamed chat keeps.
. "$TOP/tests/cli/lib.sh"
MAN=$TOP/man/kvchat.1
M=$T/m.gguf
qwen2_tiny "$M" || exit 1

# ---- kvchat --help: the models and sessions lines name every subcommand of
# models --help and sessions --help (issue 29: it omitted sessions search)
run "$KVCHAT" --help
for cmd in models sessions; do
    line=$(grep "^  $cmd " "$T/out")
    for sub in $("$KVCHAT" $cmd --help | sed -n "s/^ *\(usage: \)\{0,1\}kvchat $cmd \([a-z]*\).*/\2/p" | sort -u); do
        echo "$line" | grep -q "\b$sub\b" && ok "kvchat --help: $cmd $sub" || not_ok "kvchat --help lacks $cmd $sub: $line"
    done
done

# ---- run --help: every key run --json prints
run sh -c "$KVCHAT run -m $M -t 1 -n 2 --json hi < /dev/null"
keys=$(jq -r 'keys[]' "$T/out")
"$KVCHAT" run --help >"$T/help"
for k in $keys; do
    grep -q "\b$k\b" "$T/help" && ok "run --help: $k" || not_ok "run --help lacks $k"
done

# ---- the /set keys (as /set's error lists them, from the one table) in README and kvchat.1
run sh -c "printf '/set bogus 1\n' | $KVCHAT chat -m $M -t 1"
keys=$(sed -n "s/.*unknown setting 'bogus' (try: \(.*\))/\1/p" "$T/err" | tr -d ',')
[ "$(echo $keys | wc -w)" -ge 8 ] && ok "/set keys: $keys" || not_ok "/set keys: '$keys'"
setline=$(grep '^| `/set KEY VALUE`' "$TOP/README.md")
mansets=$(sed -n '/^\.BI \/set " key value"/,/^for the rest of the chat/p' "$MAN")
for k in $keys; do
    echo "$setline" | grep -q "\`$k\`" && ok "README's /set names $k" || not_ok "README's /set lacks $k"
    echo "$mansets" | grep -q "\b$k\b" && ok "kvchat.1's /set names $k" || not_ok "kvchat.1's /set lacks $k"
done

# ---- the chat's slash commands (/help, from the one table) in kvchat.1 and README, and what
# issue 29 changed said the same in /help, chat --help, kvchat.1 and README
run sh -c "printf '/help\n' | $KVCHAT chat -m $M -t 1"
cp "$T/err" "$T/help.txt" # the chat's notes go to stderr when stdout is not a terminal
cmds=$(sed -n 's|^  \(/[a-z?]*\) .*|\1|p' "$T/help.txt")
[ "$(echo $cmds | wc -w)" -ge 14 ] && ok "/help lists $(echo $cmds | wc -w) commands" || not_ok "/help: '$cmds'"
# a command's entry in kvchat.1: from the .TP before its name to the next .TP or .RE
entry() { awk -v c="$1" 'on && /^\.(TP|RE)/ { exit } on { print } prev ~ /^\.TP/ && index($0, c) && $0 ~ "^\\.B[IR]* " { on = 1; print } { prev = $0 }' "$MAN"; }
for c in $cmds; do
    [ -n "$(entry "$c")" ] && ok "kvchat.1 has an entry for $c" || not_ok "kvchat.1 has no entry for $c"
    grep -q "^| \`$c" "$TOP/README.md" && ok "README's table has $c" || not_ok "README's table lacks $c"
done
helpline() { grep "^  $1 " "$T/help.txt"; }
for c in /undo /retry; do
    helpline $c | grep -q "asks in a saved session" && entry $c | grep -q "In a saved session it asks first" &&
        grep "^| \`$c\`" "$TOP/README.md" | grep -q "asks first in a saved session" &&
        ok "$c: asks in a saved session, say /help, kvchat.1 and README" || not_ok "$c: the docs disagree"
done
helpline /clear | grep -q "a session stays as saved" && entry /clear | grep -q "session stays exactly as saved" &&
    grep '^| `/clear`' "$TOP/README.md" | grep -q "the session stays as saved" &&
    ok "/clear: a session stays as saved, say /help, kvchat.1 and README" || not_ok "/clear: the docs disagree"
helpline /load | grep -q "with its own model" && entry /load | grep -q "with its own model" &&
    grep '^| `/load' "$TOP/README.md" | grep -q "with its own model" &&
    ok "/load: with its own model, say /help, kvchat.1 and README" || not_ok "/load: the docs disagree"
helpline /exit | grep -q "an unsaved chat asks" && entry /exit | grep -q "An unnamed chat with exchanges asks first" &&
    ok "/exit: an unsaved chat asks, say /help and kvchat.1" || not_ok "/exit: the docs disagree"
"$KVCHAT" chat --help >"$T/chelp"
"$KVCHAT" run --help >"$T/rhelp"
for o in --yes --private; do
    grep -q -- "$o" "$T/chelp" && grep -qF -- "\\-\\-${o#--}" "$MAN" && ok "chat --help and kvchat.1: $o" || not_ok "$o undocumented"
done
grep -q -- "--private" "$T/rhelp" && ok "run --help: --private" || not_ok "run --help lacks --private"
grep -q "sessions forget" "$T/chelp" && grep -q "sessions forget" "$T/rhelp" && grep -q "sessions forget" "$TOP/README.md" &&
    ok "chat and run --help and README say what an unnamed chat keeps and what forgets it" || not_ok "forget: undocumented"
grep -q "0600 and every folder 0700" "$MAN" && grep -q "0600 and its" "$TOP/README.md" &&
    ok "kvchat.1 and README: the store's modes" || not_ok "the modes are undocumented"

# ---- the prefix rule of the slash commands, as chat --help and kvchat.1 state it:
# a unique prefix runs /help /sessions /set /show /stats, the others only by their full name
short=$(tr '\n' ' ' <"$T/chelp" | sed -n 's/.*a *unique prefix runs \(\(\/[a-z]* *\)*\), the others only run *by their full name.*/\1/p')
[ "$(echo $short | wc -w)" -ge 3 ] && ok "chat --help: a prefix runs $short" || not_ok "chat --help: no prefix rule"
manshort=$(sed -n '/^A unique prefix such as/,/their full name/p' "$MAN" | sed -n 's/^\.RB ( \(.*\) );$/\1/p' | tr -d '",')
[ "$(echo $manshort)" = "$(echo $short)" ] && ok "kvchat.1 names the same ones" || not_ok "kvchat.1: '$manshort', chat --help: '$short'"
for c in $cmds; do
    [ ${#c} -gt 3 ] || continue
    p=${c%?} # the name less its last letter
    [ "$c" = /set ] && continue # (/se is /sessions' prefix too)
    run sh -c "printf '%s\n' '$p' | $KVCHAT chat -m $M -t 1"
    if echo " $short " | grep -q " $c "; then
        grep -q "runs nothing\|unknown command\|ambiguous" "$T/err" && not_ok "$p did not run $c: $(cat "$T/err")" ||
            ok "$p runs $c"
    else
        grep -q "'$p' runs nothing: type $c in full" "$T/err" && ok "$p runs nothing ($c only by its full name)" ||
            not_ok "$p: $(cat "$T/err")"
    fi
done

# ---- "an on/off option --X is turned off by --no-X" (kvchat.1, commands.md), and
# --no-no-X is no option (issue 29: --no-no-cache was taken): the common flags of run and chat
flags=$(sed -n 's/^ *\(-[a-zA-Z], \)\{0,1\}--\([a-z-]*\)  .*/\2/p' "$T/rhelp" "$T/chelp" | sort -u | grep -vx 'continue\|json\|yes')
[ "$(echo $flags | wc -w)" -ge 5 ] && ok "on/off options: $(echo $flags)" || not_ok "on/off options: '$flags'"
for f in $flags; do
    x=${f#no-}
    forms="--no-$x"
    [ "$f" = "$x" ] || grep -q -- "--$x[^-a-z]" "$T/rhelp" && forms="--$x --no-$x"
    for o in $forms; do
        run sh -c "$KVCHAT run -m $M -t 1 -n 1 $o hi < /dev/null"
        expect_rc 0
    done
    run sh -c "$KVCHAT run -m $M -t 1 -n 1 --no-no-$x hi < /dev/null"
    [ "$rc" = 1 ] && grep -q "unknown option '--no-no-$x'" "$T/err" && ok "--no-no-$x is refused" ||
        not_ok "--no-no-$x: exit $rc"
done

# ---- "an answer that fills the context says so", for run too (issue 29):
# exit 6 in run --help and kvchat.1 (t0037 checks the program)
grep -q "6 the answer" "$T/rhelp" && ok "run --help: exit 6" || not_ok "run --help says nothing of exit 6"
sed -n '/^\.SH EXIT STATUS/,/^\.SH /p' "$MAN" | grep -q '^\.B 6' && ok "kvchat.1: exit 6" || not_ok "kvchat.1: no exit 6"

# ---- what an unnamed chat keeps, said by /show, chat --help and README (the banner: t0506)
run sh -c "printf '/show\n' | $KVCHAT chat -m $M -t 1"
grep -q "^session    unnamed: no session (gone at exit unless /save NAME keeps it), but its KV" "$T/err" &&
    tr '\n' ' ' <"$T/err" | grep -q "KV *blocks and token ids stay in the store" &&
    ok "/show: an unnamed chat's KV blocks and token ids stay" || not_ok "/show: $(cat "$T/err")"
tr '\n' ' ' <"$T/chelp" | grep -q "KV blocks and token ids stay in the store" && ok "chat --help says so" ||
    not_ok "chat --help does not say what an unnamed chat keeps"
tr '\n' ' ' <"$TOP/README.md" | grep -q "it leaves the KV blocks and token ids of its prompts" && ok "README says so" ||
    not_ok "README does not say what an unnamed chat keeps"

# ---- what a damaged index is checked for, said without over-claiming (issue 29:
# "any damage is reported", yet a letter changed inside a stored message passes quick_check)
grep -qi "any damage" "$TOP/README.md" "$TOP/docs/"*.md "$MAN" && not_ok "'any damage ... is reported' is claimed" ||
    ok "no 'any damage ... is reported'"
tr '\n' ' ' <"$TOP/docs/cache.md" | grep -q "What this does not catch: a letter changed inside a stored message" &&
    ok "docs/cache.md says what quick_check does not catch" || not_ok "docs/cache.md: the limit of the checks is not said"

# ---- kvchat.1
grep -q "and later the session index" "$MAN" && not_ok "kvchat.1: stale 'and later'" || ok "kvchat.1: no stale 'and later'"
for name in $(sed -n 's/^kvchat models info \\-\\-json \([^ ]*\) .*/\1/p' "$MAN"); do
    "$KVCHAT" models aliases | grep -q "^$name " && ok "kvchat.1: models info example '$name' is an alias" ||
        not_ok "kvchat.1: models info example '$name' is no alias"
done
# every sessions subcommand has an entry followed by its description
for sub in $("$KVCHAT" sessions --help | sed -n 's/^ *\(usage: \)\{0,1\}kvchat sessions \([a-z]*\).*/\2/p' | sort -u); do
    n=$(grep -n "^\.B[I]* \"*sessions $sub" "$MAN" | head -n 1 | cut -d: -f1)
    if [ -z "$n" ]; then
        not_ok "kvchat.1 has no entry for sessions $sub"
    elif sed -n "$((n + 1))p" "$MAN" | grep -q '^\.TP'; then
        not_ok "kvchat.1: sessions $sub is not described"
    else
        ok "kvchat.1 describes sessions $sub"
    fi
done
finish
