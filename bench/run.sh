#!/usr/bin/env bash
# Runs every benchmark of decree, each printing ratios against a reference
# tool measured in the same run (see the script of each for its goal):
#   checkpoint  snapshots and diffs vs git, on a 20,000-file, 300 MB tree
#   replica     replica sync vs rsync -a, same tree size
#   pipeline    per-message overhead of a 200-message chain vs plain bash,
#               alone and with 10,000 messages of other chains queued
#   ralph       per message vs a ralph loop (bash routine.sh && git add -A &&
#               git commit -q) at 1,000, 10,000 and 50,000 files
#   checkpoint also times a 16-byte change in a 500 MB file (BIG_MB)
# TMPDIR chooses the file system the trees live on (e.g. TMPDIR=/dev/shm
# for tmpfs); every benchmark prints the load average beside its ratios.
#   queue       the same with 1 / 1,000 / 10,000 queued, separate controller
#               and worker processes, and 20 clients polling status
#   parallel    8 chains of 3 two-second messages on 1/2/4/8 replica workers
#               vs the ideal; merge overhead; a conflict that is requeued
#   status      decreectl status with no controller, 1 vs 10,000 queued
#   stream      200 MB of routine output through decreectl run, end to end,
#               vs bash | cat > /dev/null
#   drivers     200 MB of routine output through a driver vs bash > /dev/null,
#               for two routines, with the splice floor of pipe capture
#   worker      routine output through the worker's log shipping (heap)
#   memory      decreectl's peak RSS with a 200 MB and a 1 GB file vs git add;
#               then each process's peak RSS with a 60 MB message vs cat
# A run takes several minutes and a few GB of temporary disk.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
echo "== checkpoint"; "$here/checkpoint/run.sh"
echo; echo "== replica"; "$here/replica/run.sh"
echo; echo "== pipeline"; "$here/pipeline/run.sh"
echo; echo "== pipeline, 10,000 queued"; "$here/pipeline/run.sh" 200 1000 1 10000
echo; echo "== ralph loop, 1,000 files"; RALPH=1 "$here/pipeline/run.sh" 200 1000 3
echo; echo "== ralph loop, 10,000 files"; RALPH=1 "$here/pipeline/run.sh" 100 10000 3
echo; echo "== ralph loop, 50,000 files"; RALPH=1 "$here/pipeline/run.sh" 50 50000 3
echo; echo "== queue"; "$here/queue/run.sh"
echo; echo "== parallel"; "$here/parallel/run.sh"
echo; echo "== status, no controller, 1 vs 10,000 queued"; "$here/status/run.sh"
echo; echo "== memory"; "$here/memory/run.sh" 1,200,1024
echo; echo "== memory (message body)"; "$here/memory/run.sh" -message 60
cd "$repo"
echo; echo "== stream, decreectl run end to end"; "$here/stream/run.sh" 3
echo; echo "== drivers"; go test -run '^$' -bench Stream200MB -benchtime 3x ./pkg/driver/shell/
echo; echo "== worker"; go test -run '^$' -bench RoutineOutput -benchtime 3x ./worker/
