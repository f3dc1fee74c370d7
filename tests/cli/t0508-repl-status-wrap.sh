#!/bin/sh
# t0508: the chat's own lines on a 40-column terminal (issue 29): the
# banner, /stats, /show, /set, /help and the notes wrapped at spaces as
# answers are, nothing lost ("Ctrl-D to leave", both KV figures and the
# totals), no line wider than the terminal (so it breaks no word), /show's
# labels padded; /set alone lists think, wrap, repeat_last_n and the rest;
# /set repeat_last_n N is taken and kept; ollama's /set parameter stop;
# reopening a session shows its last exchange.
. "$TOP/tests/cli/lib.sh"
. "$TOP/tests/cli/repl-lib.sh"

run sh -c "$KVCHAT run -m $M -t 1 --temp 0 -n 8 -s status 'what is two' < /dev/null"
expect_rc 0
"$KVCHAT" sessions export status | jq -j '.messages[-1].content' >"$T/last"
[ -s "$T/last" ] && ok "session 'status' has an answer" || not_ok "no answer saved"

drive narrow --cols 40 $K --temp 0 -n 12 status <<'EOF'
expect Ctrl-D\s+to\s+leave
expect the\s+last:
expect > what\s+is\s+two
expect \nstatus> 
say hi a1
line /stats
expect (generated|accepted)\nstatus> 
line /show
expect private[^\n]*\ndrafting[^\n]*(\n {11}[^\n]*)*\nstatus> 
line /help
expect ollama\.\nstatus> 
line /set
expect private[^\n]*\ndrafting[^\n]*(\n {11}[^\n]*)*\nstatus> 
line /set repeat_last_n 32
expect repeat_last_n\s+32
expect \nstatus> 
line /set parameter stop foo bar
expect stop\s+strings:\s+'foo',\s+'bar'
expect \nstatus> 
send \x04
exit 0
EOF

python3 - "$T/narrow.log" "$T/last" <<'PY'
import re, sys, unicodedata
log = open(sys.argv[1], encoding="utf-8", errors="replace").read()
last = open(sys.argv[2], encoding="utf-8", errors="replace").read()
joined = re.sub(r"\s+", " ", log)
bad = 0
def check(what, cond):
    global bad
    print(("ok: " if cond else "NOT OK: ") + what)
    bad += not cond
def width(s):
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 0 if unicodedata.category(c) in ("Mn", "Me", "Cf") else 1
               for c in s if ord(c) >= 0x20)
wide = [l for l in log.split("\n") if width(l) > 40]
check("no line wider than 40 columns (none broken mid-word by the terminal)", not wide)
for l in wide[:5]:
    print("  %d: %s" % (width(l), l))
check("the banner keeps 'Ctrl-D to leave'", "/help for commands, Ctrl-D to leave" in joined)
check("/stats keeps both KV figures", re.search(r"KV [0-9.]+ [KMG]?i?B in memory, [0-9.]+ [KMG]?i?B on disk\]", joined) is not None)
check("/stats keeps the totals", re.search(r"this process: 1 answer, \d+ tokens? prefilled, \d+ reused, \d+ generated", joined) is not None)
check("/show's labels keep their padding", re.search(r"(?m)^session    'status'", log) is not None and
      re.search(r"(?m)^context    \d", log) is not None)
check("/show's value lines go on under the value", re.search(r"(?m)^           \S", log) is not None)
check("/help's text whole", "Tab completes; Up/Down recall earlier inputs." in joined)
check("/set lists repeat_last_n, think, wrap", all(k in joined for k in ("repeat_last_n", "think on", "wrap on")))
check("/set repeat_last_n 32 taken", "repeat_last_n 32" in joined and "unknown setting" not in joined)
alnum = lambda t: re.sub(r"[^A-Za-z0-9]", "", t)
check("the last exchange shown on reopening", "> what is two" in log and alnum(last)[:40] in alnum(log))
sys.exit(1 if bad else 0)
PY
[ $? = 0 ] && ok "the 40-column transcript" || not_ok "the 40-column transcript"
# repeat_last_n is the session's now
[ "$("$KVCHAT" sessions export status | jq -r .params.repeat_last_n)" = 32 ] && ok "/set repeat_last_n is saved" ||
    not_ok "params: $("$KVCHAT" sessions export status | jq -c .params)"
finish
