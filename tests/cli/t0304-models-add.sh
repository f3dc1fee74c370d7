#!/bin/sh
# t0304: models add FILE - a GGUF already on disk into the store: a hard link
# (same inode), a symbolic link across file systems or with --symlink, a copy
# with --copy; the header checked (text, truncated, directory, missing file
# refused, nothing left in the store); names (--name, taken names, --force,
# invalid ones); the first model added becomes the default and runs by name;
# a link whose file is gone is listed as such and removed by models rm,
# which never touches the user's file; models pull of a file points to add.
. "$TOP/tests/cli/lib.sh"

M=$KVCHAT_HOME/models
SRC=$T/src
mkdir -p "$SRC"
"$MKMODEL" "$SRC/tiny-q8.gguf" --arch qwen2 --dim 64 --heads 4 --kv-heads 2 --layers 1 --ff 128 --type Q8_0 >/dev/null || exit 1
"$MKMODEL" "$SRC/other.gguf" --dim 64 --heads 4 --kv-heads 2 --layers 1 --ff 128 >/dev/null || exit 1
inode() { stat -L -c %d:%i "$1"; }
sum0=$(sha256sum <"$SRC/tiny-q8.gguf")
hidden() { find "$M" -name '.*' ! -name .add.lock 2>/dev/null | wc -l; } # (.add.lock: the store's add lock, kept)

# ---- a hard link, named after the file; the first model is the default
run "$KVCHAT" models add "$SRC/tiny-q8.gguf"
expect_rc 0; expect_out_empty
expect_err "added 'tiny-q8' (.*; a hard link to $SRC/tiny-q8.gguf)"
expect_err "'tiny-q8' is now the default model"
[ "$(inode "$M/tiny-q8.gguf")" = "$(inode "$SRC/tiny-q8.gguf")" ] && [ ! -L "$M/tiny-q8.gguf" ] &&
    ok "a hard link: the same inode" || not_ok "not a hard link: $(ls -li "$M" "$SRC")"
grep -q "^source = $SRC/tiny-q8.gguf\$" "$M/tiny-q8.meta" && grep -q '^added = link$' "$M/tiny-q8.meta" &&
    ok "the sidecar says where it came from and how" || not_ok "sidecar: $(cat "$M/tiny-q8.meta")"
run "$KVCHAT" models list
expect_rc 0; expect_out '^\* tiny-q8 .*Q8_0 *qwen2'
run "$KVCHAT" models list --json
[ "$(jq -r '.[0].source' "$T/out")" = "$SRC/tiny-q8.gguf" ] && ok "list --json: source" || not_ok "list --json: $(cat "$T/out")"
run "$KVCHAT" run -t 1 -n 2 --temp 0 hello
expect_rc 0
[ -s "$T/out" ] && ok "the added model is the default and answers" || not_ok "no answer from the default"
run "$KVCHAT" models path tiny-q8
expect_out "^$M/tiny-q8.gguf\$"

# the same file again: nothing to do; another file under that name: refused,
# then replaced with --force
run "$KVCHAT" models add "$SRC/tiny-q8.gguf"
expect_rc 0; expect_err "is already in the store as 'tiny-q8'"
run "$KVCHAT" models add --name tiny-q8 "$SRC/other.gguf"
expect_rc 1; expect_err "model 'tiny-q8' is already in the store (--force replaces it"
[ "$(inode "$M/tiny-q8.gguf")" = "$(inode "$SRC/tiny-q8.gguf")" ] && ok "a refused add changes nothing" ||
    not_ok "the entry changed"
run "$KVCHAT" models add --force --name tiny-q8 "$SRC/other.gguf"
expect_rc 0
[ "$(inode "$M/tiny-q8.gguf")" = "$(inode "$SRC/other.gguf")" ] && ok "--force replaces it" || not_ok "--force"
[ "$(sha256sum <"$SRC/tiny-q8.gguf")" = "$sum0" ] && ok "the replaced entry's file itself is untouched" ||
    not_ok "the user's file was touched"

# ---- --copy: a file of its own, same bytes; --symlink: a link to the path
run "$KVCHAT" models add --copy --name copied "$SRC/tiny-q8.gguf"
expect_rc 0; expect_err "added 'copied' (.*; a copy of $SRC/tiny-q8.gguf)"
[ "$(inode "$M/copied.gguf")" != "$(inode "$SRC/tiny-q8.gguf")" ] && cmp -s "$M/copied.gguf" "$SRC/tiny-q8.gguf" &&
    ok "--copy: another inode, the same bytes" || not_ok "--copy"
grep -q '^added = copy$' "$M/copied.meta" && ok "sidecar: added = copy" || not_ok "sidecar: $(cat "$M/copied.meta")"
run "$KVCHAT" models add --symlink --name sym "$SRC/tiny-q8.gguf"
expect_rc 0; expect_err "a symbolic link to $SRC/tiny-q8.gguf"; expect_err "moving or deleting it breaks 'sym'"
[ "$(readlink "$M/sym.gguf")" = "$SRC/tiny-q8.gguf" ] && ok "--symlink: a link to the absolute path" ||
    not_ok "--symlink: $(ls -l "$M/sym.gguf")"
(cd "$SRC" && "$KVCHAT" models add --symlink --name rel tiny-q8.gguf 2>/dev/null)
[ "$(readlink "$M/rel.gguf")" = "$SRC/tiny-q8.gguf" ] && ok "a relative FILE is linked by its absolute path" ||
    not_ok "relative: $(ls -l "$M/rel.gguf")"
run "$KVCHAT" models add --copy --symlink "$SRC/tiny-q8.gguf"
expect_rc 1; expect_err "--copy or --symlink, not both"

# ---- another file system: a hard link cannot cross it, a symbolic link does
SHM=$(mktemp -d /dev/shm/kvchat-t0304.XXXXXX) || { not_ok "no /dev/shm to test a second file system"; finish; exit 1; }
trap 'rm -rf "$T" "$SHM"' EXIT
cp "$SRC/other.gguf" "$SHM/far.gguf"
if [ "$(stat -c %d "$SHM")" = "$(stat -c %d "$M")" ]; then
    not_ok "/dev/shm is on the store's file system here: the fallback cannot be tested"
else
    run "$KVCHAT" models add "$SHM/far.gguf"
    expect_rc 0; expect_err "added 'far' (.*; a symbolic link to $SHM/far.gguf)"
    [ "$(readlink "$M/far.gguf")" = "$SHM/far.gguf" ] && ok "across file systems: a symbolic link" ||
        not_ok "across file systems: $(ls -l "$M")"
    grep -q '^added = symlink$' "$M/far.meta" && ok "sidecar: added = symlink" || not_ok "sidecar: $(cat "$M/far.meta")"
    # the file goes away: listed as gone, not runnable, removable
    rm "$SHM/far.gguf"
    run "$KVCHAT" models list
    expect_rc 0; expect_out "far .*(unreadable: a link to '$SHM/far.gguf', which is gone)"
    run "$KVCHAT" run -m far -n 1 hi
    expect_rc 2
    run "$KVCHAT" models rm far
    expect_rc 0
    [ ! -e "$M/far.gguf" ] && [ ! -L "$M/far.gguf" ] && [ ! -e "$M/far.meta" ] && ok "a dangling link is removed" ||
        not_ok "rm far: $(ls -l "$M")"
fi

# ---- models rm takes the store's entry only, never the user's file
run "$KVCHAT" models rm copied sym rel
expect_rc 0
[ -s "$SRC/tiny-q8.gguf" ] && [ ! -e "$M/sym.gguf" ] && [ ! -e "$M/copied.gguf" ] && ok "rm keeps the original file" ||
    not_ok "rm: $(ls -l "$SRC" "$M")"

# ---- what is not a GGUF model is refused, and nothing is left behind
n_before=$(ls -A "$M" | wc -l)
echo "just some text" >"$SRC/notes.gguf"
run "$KVCHAT" models add "$SRC/notes.gguf"
expect_rc 2; expect_err "cannot add '$SRC/notes.gguf': file too small for a GGUF header"
head -c 300 "$SRC/tiny-q8.gguf" >"$SRC/cut.gguf"
run "$KVCHAT" models add "$SRC/cut.gguf"
expect_rc 2; expect_err "cannot add '$SRC/cut.gguf': "
head -c 4096 /dev/urandom >"$SRC/random.gguf"
run "$KVCHAT" models add --copy "$SRC/random.gguf"
expect_rc 2; expect_err "cannot add"
run "$KVCHAT" models add "$SRC"
expect_rc 2; expect_err "cannot add '$SRC': it is a directory"
run "$KVCHAT" models add "$SRC/absent.gguf"
expect_rc 2; expect_err "cannot add '$SRC/absent.gguf': No such file or directory"
run "$KVCHAT" models add /dev/null
expect_rc 2; expect_err "it is not a regular file"
run "$KVCHAT" models add --name 'bad name' "$SRC/other.gguf"
expect_rc 1; expect_err "'bad name' is not a valid model name"
cp "$SRC/other.gguf" "$SRC/.gguf"
run "$KVCHAT" models add "$SRC/.gguf"
expect_rc 1; expect_err "cannot make a model name from '$SRC/.gguf'; give one with --name"
run "$KVCHAT" models add
expect_rc 1; expect_err "models add: expected one FILE"
run "$KVCHAT" models add --bogus "$SRC/other.gguf"
expect_rc 1; expect_err "unknown option '--bogus'"
[ "$(ls -A "$M" | wc -l)" = "$n_before" ] && [ "$(hidden)" = 0 ] && ok "refused adds leave nothing in the store" ||
    not_ok "left behind: $(ls -A "$M")"

# ---- models pull of a path, or file://, says to use models add
run "$KVCHAT" models pull "$SRC/other.gguf"
expect_rc 1; expect_err "is a file on disk, not a download; 'kvchat models add $SRC/other.gguf' puts it into the store"
run "$KVCHAT" models pull "file://$SRC/other.gguf"
expect_rc 1; expect_err "'kvchat models add $SRC/other.gguf'"

run "$KVCHAT" models add --help
expect_rc 0; expect_out 'kvchat models add \[--name NAME\] \[--copy | --symlink\] \[--force\] FILE'
finish
