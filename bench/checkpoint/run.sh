#!/usr/bin/env bash
# Times decree's checkpoints against git on the same generated tree
# (~20,000 files, ~300 MB, some large binary files) and prints ratios
# (decree time / git time; below 1.0 means decree is faster).
#
#   bench/checkpoint/run.sh [FILES] [MB]
#   WARM_ONLY=1 bench/checkpoint/run.sh    (only the warm row: quicker)
#   SKIP_COLD=1 bench/checkpoint/run.sh    (every row but the two cold ones)
#
# Measured in one run, page cache warm for both sides:
#   cold    decree snapshot (hash + store every blob)  vs  git add -A && git write-tree
#   warm    decree snapshot of the unchanged tree       vs  git status --porcelain
#   change  decree snapshot + diff after 10 edits      vs  git add -A && git diff --cached HEAD
#           (HEAD is the committed tree before the edits: what a user's repository has)
#   served  the warm and change rows in one process serving the tree (a
#           controller that stays up: checkpoint.Serve watches it; its first,
#           walking snapshot untimed)
#   big     a 16-byte change in a BIG_MB file (default 500): decree snapshot +
#           diff vs git add -A && git commit (BIG_MB=0 skips it)
# The "nosync" row skips decree's fsync of the new pack, like git's default
# for loose objects; the "fsync" row is decree's production setting, against
# git made as durable (core.fsync=loose-object, core.fsyncMethod=batch).
set -euo pipefail
FILES=${1:-20000}
MB=${2:-300}
BIG_MB=${BIG_MB:-500}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/decree-ckbench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$repo" && go build -o "$tmp/ckbench" ./bench/checkpoint)
# git runs isolated from the user's configuration.
export HOME=$tmp/home XDG_CONFIG_HOME=$tmp/home GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
mkdir -p "$HOME"
"$tmp/ckbench" gen "$tmp/tree" "$FILES" "$MB"
tree=$tmp/tree

now() { date +%s.%N; }
# t CMD... : runs CMD, prints its wall seconds.
t() { local a b; a=$(now); "$@" >/dev/null; b=$(now); echo "$b - $a" | bc -l; }
rss() { # peak RSS in MB of a command, via /usr/bin/time -v when present
	if [ -x /usr/bin/time ]; then
		/usr/bin/time -v "$@" 2>&1 >/dev/null | awk '/Maximum resident set size/ {printf "%.1f", $6/1024}'
	else
		echo "n/a"
	fi
}
ratio() { echo "scale=5; $1 / $2" | bc -l; }

gitcold() { rm -rf "$tree/.git"; git -C "$tree" init -q; git -C "$tree" add -A; git -C "$tree" write-tree; }
gitcoldsync() { rm -rf "$tree/.git"; git -C "$tree" init -q; git -C "$tree" -c core.fsync=loose-object -c core.fsyncMethod=batch add -A; git -C "$tree" write-tree; }
decold() { rm -rf "$tmp/state"; mkdir -p "$tmp/state"; "$tmp/ckbench" snapshot "$tree" "$tmp/state" "$@"; }

# Warm both caches once so neither side pays first-read I/O.
cat $(find "$tree" -type f) >/dev/null 2>&1 || true

echo "tree: $(find "$tree" -type f -not -path '*/.git/*' | wc -l) files, $(du -sm "$tree" | cut -f1) MB"

best() { # best of 3 runs of a function
	local b=999999 x
	for _ in 1 2 3; do x=$(t "$@"); if (( $(echo "$x < $b" | bc -l) )); then b=$x; fi; done
	echo "$b"
}

if [ -n "${WARM_ONLY:-}${SKIP_COLD:-}" ]; then
	gitcold >/dev/null; decold -nosync >/dev/null
else
g_cold_sync=$(best gitcoldsync)
g_cold=$(best gitcold)
d_cold_ns=$(best decold -nosync)
d_cold=$(best decold)
echo "store size after cold snapshot: $(du -sm "$tmp/state/objects" | cut -f1) MB (tree $(du -sm --exclude=.git "$tree" | cut -f1) MB, git objects $(du -sm "$tree/.git/objects" | cut -f1) MB)"
rss_cold=$(rm -rf "$tmp/state"; mkdir -p "$tmp/state"; rss "$tmp/ckbench" snapshot "$tree" "$tmp/state")
fi

# Interleaved runs, median of each side: fair when the machine's load
# changes during the run.
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
warm_d=(); warm_g=()
for _ in $(seq 15); do
	warm_d+=("$(t "$tmp/ckbench" status "$tree" "$tmp/state")")
	warm_g+=("$(t git -C "$tree" status --porcelain)")
done
d_warm=$(printf '%s\n' "${warm_d[@]}" | median)
g_warm=$(printf '%s\n' "${warm_g[@]}" | median)
rss_warm=$(rss "$tmp/ckbench" status "$tree" "$tmp/state")
if [ -n "${WARM_ONLY:-}" ]; then
	printf '%-38s %10.3f %10.3f %8s %12s %6s\n' "warm snapshot vs git status (median)" "$d_warm" "$g_warm" "$(ratio "$d_warm" "$g_warm")" "${rss_warm} MB" "$(la)"
	exit 0
fi
"$tmp/ckbench" snapshot "$tree" "$tmp/state"

# git's side starts from a committed HEAD, as a user's repository does:
# the edits are then diffed against it, not the whole tree against nothing.
git -C "$tree" add -A >/dev/null && git -C "$tree" -c user.name=b -c user.email=b@b commit -qm base
"$tmp/ckbench" mutate "$tree" 10
cp -r "$tmp/state" "$tmp/state0"
gitchange() { git -C "$tree" add -A && git -C "$tree" diff --cached HEAD; git -C "$tree" reset -q; }
# Each decree run starts from a copy of the state taken before the edits
# (made untimed); the time is the one ckbench measures in-process around
# the snapshot + diff (the state's copy and the process start excluded:
# subtracting a separately timed copy was noisier than the measure).
copyonly() { rm -rf "$tmp/state"; cp -r "$tmp/state0" "$tmp/state"; }
dechange() { copyonly; "$tmp/ckbench" diff "$tree" "$tmp/state" | sed -n 's/^diff seconds=\([0-9.]*\).*/\1/p'; }
g_change=$(best gitchange)
cd_=(); for _ in 1 2 3; do cd_+=("$(dechange)"); done
d_change=$(printf '%s\n' "${cd_[@]}" | median)
rss_change=$(copyonly; rss "$tmp/ckbench" diff "$tree" "$tmp/state")
copyonly; "$tmp/ckbench" diff "$tree" "$tmp/state" | sed 's/^/  /'

# The same two measures in a process that serves the tree (a controller
# that stays up: the checkpointer watches it, see checkpoint.Serve).
served=$("$tmp/ckbench" served "$tree" "$tmp/state")
s_warm=$(echo "$served" | sed -n 's/.*warm_seconds=\([0-9.]*\).*/\1/p')
s_change=$(echo "$served" | sed -n 's/.*change_seconds=\([0-9.]*\).*/\1/p')
s_rss=$(echo "$served" | sed -n 's/.*maxrss_mb=\([0-9.]*\).*/\1/p')

la() { cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo n/a; }
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
printf '\n%-38s %10s %10s %8s %12s %6s\n' "measurement" "decree s" "git s" "ratio" "decree RSS" "load"
[ -n "${SKIP_COLD:-}" ] || printf '%-38s %10.3f %10.3f %8s %12s %6s\n' "cold snapshot (nosync)" "$d_cold_ns" "$g_cold" "$(ratio "$d_cold_ns" "$g_cold")" "${rss_cold} MB" "$(la)"
[ -n "${SKIP_COLD:-}" ] || printf '%-38s %10.3f %10.3f %8s %12s %6s\n' "cold snapshot (fsync, git fsync)" "$d_cold" "$g_cold_sync" "$(ratio "$d_cold" "$g_cold_sync")" "" "$(la)"
printf '%-38s %10.3f %10.3f %8s %12s %6s\n' "warm snapshot vs git status (median)" "$d_warm" "$g_warm" "$(ratio "$d_warm" "$g_warm")" "${rss_warm} MB" "$(la)"
printf '%-38s %10.3f %10.3f %8s %12s %6s\n' "10 edits: snapshot+diff vs git" "$d_change" "$g_change" "$(ratio "$d_change" "$g_change")" "${rss_change} MB" "$(la)"
printf '%-38s %10.6f %10.3f %8s %12s %6s\n' "served: warm snapshot vs git status" "$s_warm" "$g_warm" "$(ratio "$s_warm" "$g_warm")" "${s_rss} MB" "$(la)"
printf '%-38s %10.6f %10.3f %8s %12s %6s\n' "served: 10 edits, snapshot+diff vs git" "$s_change" "$g_change" "$(ratio "$s_change" "$g_change")" "" "$(la)"

[ "$BIG_MB" -gt 0 ] || exit 0
# A 16-byte change in a large binary file: decree's snapshot + diff (the
# file's new version stored, the change written as a binary delta) against
# git add -A && git commit, each from the same committed state.
big=$tmp/big
rm -rf "$tree" "$tmp/state" "$tmp/state0"
mkdir -p "$big"
"$tmp/ckbench" genbig "$big/data.bin" "$BIG_MB"
git -C "$big" init -q && git -C "$big" add -A && git -C "$big" -c user.name=b -c user.email=b@b commit -qm base
mkdir -p "$tmp/bstate" && "$tmp/ckbench" snapshot "$big" "$tmp/bstate" >/dev/null
bd=(); bg=(); bsize=0
for _ in 1 2 3; do
	"$tmp/ckbench" poke "$big/data.bin"
	sync
	bg+=("$(t sh -c "git -C '$big' add -A && git -C '$big' -c user.name=b -c user.email=b@b commit -qm step")")
	a=$(now); out=$("$tmp/ckbench" diff "$big" "$tmp/bstate"); b=$(now)
	bd+=("$(echo "$b - $a" | bc -l)")
	bsize=$(echo "$out" | sed -n 's/.*diff_bytes=\([0-9]*\).*/\1/p')
	"$tmp/ckbench" snapshot "$big" "$tmp/bstate" >/dev/null   # the next message's checkpoint
done
d_big=$(printf '%s\n' "${bd[@]}" | median)
g_big=$(printf '%s\n' "${bg[@]}" | median)
printf '%-38s %10.3f %10.3f %8s %12s %6s\n' "16 bytes in ${BIG_MB} MB: diff vs commit" "$d_big" "$g_big" "$(ratio "$d_big" "$g_big")" "diff ${bsize} B" "$(la)"
