#!/usr/bin/env bash
# Entrypoint of the all-in-one decree image (Dockerfile target "decree").
#
#   DECREE_AI=claude|opencode|copilot  install that AI CLI from the npm
#                                      registry at start (skipped when it is
#                                      already on PATH); empty: none
#   DECREE_DAEMON=true                 run `decreectl daemon` until stopped
#   DECREE_INTERVAL=2                  the daemon's inbox poll (seconds or a
#                                      duration such as 500ms)
#   /work                              the project (DECREE_WORK moves it)
#   /routines                          a shared routine library (DECREE_ROUTINES
#                                      moves it), reachable from config.yml as
#                                      routine_source: "~/.decree/routines"
#
# With arguments, they are a decreectl command run on the project
# (`docker run ... decree status`); without, the daemon when DECREE_DAEMON
# is true, else a single `process`. .decree/ is created when missing
# (decreectl init never overwrites a file). decreectl replaces this script
# (exec), so SIGTERM from `docker stop` reaches it directly.
set -euo pipefail

work="${DECREE_WORK:-/work}"
routines="${DECREE_ROUTINES:-/routines}"
ai="${DECREE_AI:-}"

say() { echo "decree-entrypoint: $*" >&2; }

# A home and an npm prefix the container's user can write, whatever uid
# compose runs it as.
if [ -z "${HOME:-}" ] || ! mkdir -p "$HOME" 2>/dev/null || [ ! -w "$HOME" ]; then
  export HOME="${TMPDIR:-/tmp}/decree-home"
  mkdir -p "$HOME"
fi
export NPM_CONFIG_PREFIX="${NPM_CONFIG_PREFIX:-$HOME/.npm-global}"
mkdir -p "$NPM_CONFIG_PREFIX" 2>/dev/null || { export NPM_CONFIG_PREFIX="$HOME/.npm-global"; mkdir -p "$NPM_CONFIG_PREFIX"; }
export PATH="$NPM_CONFIG_PREFIX/bin:$PATH"

case "$ai" in
  "") pkg="" ;;
  claude) pkg="@anthropic-ai/claude-code" ;;
  opencode) pkg="opencode-ai" ;;
  copilot) pkg="@github/copilot" ;;
  *) say "DECREE_AI=$ai is not supported; use claude, opencode or copilot (or leave it empty)"; exit 2 ;;
esac
if [ -n "$pkg" ]; then
  if command -v "$ai" >/dev/null 2>&1; then
    say "$ai is installed ($(command -v "$ai"))"
  else
    say "installing $ai ($pkg) from the npm registry"
    npm install --global --no-audit --no-fund "$pkg" >&2 || { say "npm install $pkg failed; check the network and the registry (npm config get registry)"; exit 1; }
  fi
fi

case "${DECREE_DAEMON:-false}" in
  true|1|yes) daemon=1 ;;
  false|0|no|"") daemon=0 ;;
  *) say "DECREE_DAEMON=$DECREE_DAEMON: use true or false"; exit 2 ;;
esac

if [ ! -d "$work" ]; then
  say "$work does not exist: mount the project there (-v \"\$PWD:/work\")"
  exit 2
fi

# Shared routines: config.yml names them as ~/.decree/routines (the same
# path as on a workstation).
if [ -d "$routines" ]; then
  mkdir -p "$HOME/.decree"
  ln -sfn "$routines" "$HOME/.decree/routines"
  if [ -f "$work/.decree/config.yml" ] && ! grep -q '^routine_source:' "$work/.decree/config.yml"; then
    say "shared routines are mounted at $routines; add routine_source: \"~/.decree/routines\" to .decree/config.yml to use them"
  fi
fi

init_args=()
[ -n "$ai" ] && init_args=(--ai "$ai")
decreectl -C "$work" init "${init_args[@]}" >/dev/null

if [ "$#" -gt 0 ]; then
  exec decreectl -C "$work" "$@"
fi
if [ "$daemon" = 1 ]; then
  exec decreectl -C "$work" daemon --interval "${DECREE_INTERVAL:-2}"
fi
exec decreectl -C "$work" process
