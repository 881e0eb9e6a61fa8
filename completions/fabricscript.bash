# fabricscript.bash -- bash completion for fabricscript: subcommands, options
# (and their values), rule ids after `explain`, scripts and directories.
# The option and rule lists come from the installed binary itself
# (`fabricscript --help`, `fabricscript explain`), so they cannot drift from it.
_fabricscript() {
  local cur prev words cword
  if declare -F _init_completion >/dev/null; then
    _init_completion -s || return
  else
    cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    words=("${COMP_WORDS[@]}") cword=$COMP_CWORD
  fi
  local fs=${words[0]} sub="" i subs
  subs=$("$fs" --help 2>/dev/null | grep -oE 'fabricscript [a-z]+ ' | cut -d' ' -f2 | sort -u)
  for ((i = 1; i < cword; i++)); do
    [[ ${words[i]} == -D ]] && { ((i++)); continue; }
    if [[ $'\n'$subs$'\n' == *$'\n'${words[i]}$'\n'* ]]; then sub=${words[i]}; break; fi
  done
  # the value of an option given as --opt=VALUE
  if [[ $cur == --*=* ]]; then
    local opt=${cur%%=*} val=${cur#*=} values=""
    case $opt in
      --diagnostics-format) values="text json sarif" ;;
      --color) values="auto always never" ;;
      --format) [[ $sub == test ]] && values="text tap junit" || values="text json" ;;
      --accelerator) values="auto cpu cuda gpu mps tpu" ;;
      --strategy) values="auto ddp ddp_spawn ddp_fork ddp_notebook fsdp deepspeed dp single_device" ;;
      --precision) values="32-true 64-true bf16-mixed bf16-true 16-mixed 16-true transformer-engine" ;;
      --gpu-memory) values="H100 H200 A100-40GB A100-80GB L4" ;;
    esac
    COMPREPLY=($(compgen -W "$values" -- "$val"))
    return
  fi
  if [[ $sub == explain && $cur != -* ]]; then
    COMPREPLY=($(compgen -W "$("$fs" explain 2>/dev/null | cut -d' ' -f1)" -- "${cur^^}"))
    return
  fi
  if [[ $cur == -* ]]; then
    local opts
    opts=$("$fs" --help 2>/dev/null | grep -oE -- '--[a-z][a-z-]*=?' | sort -u)
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    [[ ${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null
    return
  fi
  [[ $prev == -D ]] && return
  [[ -z $sub ]] && COMPREPLY=($(compgen -W "$subs" -- "$cur"))
  # scripts: .fab and .py files, and directories to descend into
  local IFS=$'\n' f
  COMPREPLY+=($(compgen -d -- "$cur"))
  for f in $(compgen -f -- "$cur"); do
    [[ $f == *.fab || $f == *.py ]] && COMPREPLY+=("$f")
  done
  compopt -o filenames 2>/dev/null
}
complete -F _fabricscript fabricscript
