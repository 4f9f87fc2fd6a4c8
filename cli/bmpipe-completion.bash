# bash completion for bmpipe, installed by `cmake --install` into
# share/bash-completion/completions/bmpipe. The option names are not copied here: they are
# read from `bmpipe COMMAND --help`, which prints each command's option table, so the
# completion follows the binary it completes.
_bmpipe() {
  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
  local bin="${COMP_WORDS[0]}"
  local commands="simulate schedules cost compare plan search import export report help"
  COMPREPLY=()
  if [[ $COMP_CWORD -eq 1 ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$commands --help --version" -- "$cur")
    return 0
  fi
  local command="${COMP_WORDS[1]}"
  if [[ $command == help && $COMP_CWORD -eq 2 ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
    return 0
  fi
  if [[ $command == import && $COMP_CWORD -eq 2 && $cur != -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "megatron mindformers torchtitan profile" -- "$cur")
    return 0
  fi
  case "$prev" in
    --schedule)
      mapfile -t COMPREPLY < <(compgen -W "$("$bin" schedules --names 2>/dev/null) auto" -- "$cur")
      return 0 ;;
    --planner)
      mapfile -t COMPREPLY < <(compgen -W "off quick full" -- "$cur")
      return 0 ;;
    --format)
      mapfile -t COMPREPLY < <(compgen -W "table megatron mindformers torchtitan" -- "$cur")
      return 0 ;;
  esac
  if [[ $cur == -* ]]; then
    local options
    options="$("$bin" "$command" --help 2>/dev/null | grep -oE -- '--[A-Za-z][A-Za-z0-9-]*' | sort -u)"
    mapfile -t COMPREPLY < <(compgen -W "$options" -- "$cur")
    return 0
  fi
  mapfile -t COMPREPLY < <(compgen -f -- "$cur")
}
complete -o filenames -F _bmpipe bmpipe
