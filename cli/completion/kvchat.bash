# bash completion for kvchat: commands, options, session names and model
# names. The candidates come from `kvchat __complete WORD... CURRENT` (see
# cli/cmd-complete.c), so this script only hands the line over.
# Installed by `make install` as $(PREFIX)/share/bash-completion/completions/kvchat;
# or source it from ~/.bashrc.

_kvchat() {
    local prog=${COMP_WORDS[0]} line cur files=0
    [[ $prog == "~"* ]] && prog=$HOME${prog#"~"}
    # the words up to the cursor, split at blanks: bash's own COMP_WORDS
    # would also split model names such as qwen2.5:0.5b at the colon
    local text=${COMP_LINE:0:COMP_POINT}
    local -a words
    read -ra words <<<"$text"
    if [[ -z $text || $text == *[[:blank:]] ]]; then
        cur=
    else
        cur=${words[${#words[@]} - 1]}
        unset 'words[${#words[@]}-1]'
    fi
    COMPREPLY=()
    while IFS= read -r line; do
        if [[ $line == :files ]]; then
            files=1
        elif [[ -n $line ]]; then
            COMPREPLY+=("${line%%$'\t'*}")
        fi
    done < <("$prog" __complete "${words[@]:1}" "$cur" 2>/dev/null)
    if ((files)); then
        compopt -o filenames 2>/dev/null
        while IFS= read -r line; do
            COMPREPLY+=("$line")
        done < <(compgen -f -- "$cur")
    fi
    # bash replaces only what follows the last ':' of the word (a word
    # break), so the candidates lose what comes before it
    if [[ $cur == *:* && $COMP_WORDBREAKS == *:* ]]; then
        local pre=${cur%"${cur##*:}"} i
        for i in "${!COMPREPLY[@]}"; do
            COMPREPLY[i]=${COMPREPLY[i]#"$pre"}
        done
    fi
    return 0
}

complete -F _kvchat kvchat
