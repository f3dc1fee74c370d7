#!/bin/sh
# t0009: `make install` honours prefix=DIR and PREFIX=DIR on the command
# line, as GNU makefiles do (and bindir, mandir, DESTDIR); `make uninstall`
# removes what it installed. Each install is first run with -n: nothing is
# installed unless every path it would write is under the test's directory.
. "$TOP/tests/cli/lib.sh"
unset MAKEFLAGS MFLAGS MAKELEVEL
[ -f "$TOP/Makefile" ] || { not_ok "no Makefile in $TOP (run ./configure)"; finish; exit 1; }

# inst NAME MAKE-ARGS...: make install with those arguments, if its dry run
# writes only under $T
inst() {
    name=$1
    shift
    make -s -C "$TOP" -n install "$@" >"$T/$name.dry" 2>&1
    if grep -E '(cp|mkdir|chmod) ' "$T/$name.dry" | tr ' ' '\n' | grep '^/' | grep -v "^$T/" >"$T/$name.outside"; then
        not_ok "$name: make install $* would write outside the test: $(head -n 3 "$T/$name.outside" | tr '\n' ' ')"
        return 1
    fi
    ok "$name: make -n install $* writes only under the test's directory"
    make -s -C "$TOP" install "$@" >"$T/$name.log" 2>&1 || { not_ok "$name: make install failed"; cat "$T/$name.log"; return 1; }
}
# installed DIR: kvchat and its two pages are under DIR, with their modes
installed() {
    d=$1
    [ -x "$d/bin/kvchat" ] && [ "$(stat -c %a "$d/bin/kvchat")" = 755 ] && ok "$d/bin/kvchat" || not_ok "no $d/bin/kvchat"
    [ "$(stat -c %a "$d/share/man/man1/kvchat.1" 2>/dev/null)" = 644 ] && ok "$d/share/man/man1/kvchat.1" ||
        not_ok "no $d/share/man/man1/kvchat.1"
    [ -f "$d/share/man/man5/kvchat-files.5" ] && ok "$d/share/man/man5/kvchat-files.5" ||
        not_ok "no $d/share/man/man5/kvchat-files.5"
}

inst lower prefix="$T/lower" && installed "$T/lower"
run "$T/lower/bin/kvchat" --version
expect_rc 0; expect_out "^kvchat "
inst upper PREFIX="$T/upper" && installed "$T/upper"
inst stage DESTDIR="$T/stage" prefix=/opt/kvchat && installed "$T/stage/opt/kvchat"
inst dirs prefix="$T/p" bindir="$T/elsewhere/bin" mandir="$T/elsewhere/man"
[ -x "$T/elsewhere/bin/kvchat" ] && [ -f "$T/elsewhere/man/man1/kvchat.1" ] && [ ! -e "$T/p/bin/kvchat" ] &&
    ok "bindir and mandir override the prefix's" || not_ok "bindir and mandir"

make -s -C "$TOP" -n uninstall prefix="$T/lower" | grep -q "rm -f $T/lower/bin/kvchat" &&
    make -s -C "$TOP" uninstall prefix="$T/lower" >/dev/null 2>&1
[ ! -e "$T/lower/bin/kvchat" ] && [ ! -e "$T/lower/share/man/man1/kvchat.1" ] &&
    ok "make uninstall prefix=DIR removes them" || not_ok "make uninstall prefix=DIR"
finish
