#!/usr/bin/env bash
# Times 200 MB of routine output end to end through `decreectl run` (the
# embedded controller and worker: driver, log shipping, logbook with the
# default 64 MiB tail cap, checkpoint before and after) against
# `bash routine.sh | cat > /dev/null`, interleaved, median of RUNS, on a
# project of 100 files. The driver alone is measured by
# `go test -bench Stream200MB ./pkg/driver/shell/` (bench/run.sh runs both).
#
#   bench/stream/run.sh [RUNS]
#   OTHER=/path/to/decreectl bench/stream/run.sh   (also times another build,
#                                                   interleaved: an A/B of a change)
#
# Goal: decreectl run / (bash | cat) <= 1.2. Each run also times
# `bash routine.sh > file` (the log written to a file, no cap, no fsync):
# what any design that keeps the log pays at least, printed beside the
# ratio. `go run ./bench/stream/prof -cpuprofile cpu.pprof` profiles
# decreectl run in-process on the same routine.
set -euo pipefail
RUNS=${1:-3}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/decree-streambench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$repo" && go build -o "$tmp/bin/" ./cmd/decreectl ./cmd/decree-supervisor)
routine="awk 'BEGIN { for (i = 0; i < 3495253; i++) printf \"%08d routine output line, sixty bytes long........\\n\", i }'"
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mkproj() {
	local d=$1 i
	mkdir -p "$d/src" "$d/.decree/routines"
	for i in $(seq 100); do echo "file $i" > "$d/src/f$i.txt"; done
	printf 'commands:\n  router: ""\nmax_retries: 1\ndefault_routine: loud\n' > "$d/.decree/config.yml"
	printf '#!/usr/bin/env bash\n%s\n' "$routine" > "$d/.decree/routines/loud.sh"
}
ref=(); dec=(); oth=(); flo=()
for i in $(seq "$RUNS"); do
	p=$tmp/p$i; mkproj "$p"; sync
	a=$(now); bash "$p/.decree/routines/loud.sh" | cat > /dev/null; b=$(now)
	ref+=("$(echo "$b - $a" | bc -l)")
	a=$(now); bash "$p/.decree/routines/loud.sh" > "$tmp/plain.log"; b=$(now); rm -f "$tmp/plain.log"
	flo+=("$(echo "$b - $a" | bc -l)")
	a=$(now)
	DECREE_CONTROLLER= "$tmp/bin/decreectl" -C "$p" run -q -m "stream" >"$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
	b=$(now)
	dec+=("$(echo "$b - $a" | bc -l)")
	if [ -n "${OTHER:-}" ]; then
		q=$tmp/q$i; mkproj "$q"; sync
		a=$(now)
		DECREE_CONTROLLER= "$OTHER" -C "$q" run -q -m "stream" >"$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
		b=$(now)
		oth+=("$(echo "$b - $a" | bc -l)")
		echo "run $i: other decreectl $(printf '%.3f' "${oth[-1]}") s"
	fi
	log=$(find "$p/.decree/runs" -name '*.log' -size +1M | head -1)
	echo "run $i: bash|cat $(printf '%.3f' "${ref[-1]}") s, bash >file $(printf '%.3f' "${flo[-1]}") s, decreectl run $(printf '%.3f' "${dec[-1]}") s, log kept $(stat -c %s "$log" 2>/dev/null || echo '?') bytes, load $(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo n/a)"
done
r=$(printf '%s\n' "${ref[@]}" | median); d=$(printf '%s\n' "${dec[@]}" | median); f=$(printf '%s\n' "${flo[@]}" | median)
printf 'stream 200 MB: decreectl run %.3f s, bash | cat %.3f s, ratio %.2f (goal <= 1.2); bash > file %.3f s (%.2f), load %s\n' "$d" "$r" "$(echo "$d / $r" | bc -l)" "$f" "$(echo "$f / $r" | bc -l)" "$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo n/a)"
if [ -n "${OTHER:-}" ]; then
	o=$(printf '%s\n' "${oth[@]}" | median)
	printf 'other decreectl %.3f s, ratio %.2f against bash | cat; this one over the other %.2f\n' "$o" "$(echo "$o / $r" | bc -l)" "$(echo "$d / $o" | bc -l)"
fi
