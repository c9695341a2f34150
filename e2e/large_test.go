package e2e

import (
	"strconv"
	"strings"
	"testing"
)

// TestLargeBodiesOverTheSocket runs a separate controller and worker over
// the unix socket: a 10 MB message reaches its routine intact (the worker
// receives it in its assignment), and a runs listing of more than 4 MiB
// (gRPC's default limit) reaches decreectl. Every end uses the one message
// size limit of pkg/auth.
func TestLargeBodiesOverTheSocket(t *testing.T) {
	t.Parallel()
	p := newProject(t, binary, baseConfig)
	// The routine records the size of the message it got and leaves 45,000
	// artifacts with long names in its run directory (about 5 MB of
	// names in the listing).
	p.routine("develop", "", `wc -c < "$message_file" > size.txt
grep -c 'line of a large message' "$message_file" > lines.txt || true
if grep -q MANY "$message_file"; then
  cd "$message_dir" && for i in $(seq 45000); do : > "artifact-with-a-long-name-so-that-the-listing-grows-quickly-past-the-four-mebibytes-grpc-allows-by-default-$i.txt"; done
fi`)
	startController(t, p)
	startWorker(t, p, "large-worker")

	line := "line of a large message, padded to about one hundred bytes .........................\n"
	body := strings.Repeat(line, (10<<20)/len(line)+1)
	r := p.ctl(body, "run", "-m", "big")
	mustCode(t, r, 0)
	if got, want := strings.TrimSpace(p.read("lines.txt")), strings.Count(body, "\n"); got != strconv.Itoa(want) {
		t.Errorf("the routine saw %s lines of the message, want %d\n%s", got, want, r)
	}

	r = p.ctl("MANY artifacts\n", "run", "-m", "many")
	mustCode(t, r, 0)
	r = p.ctl("", "runs", "-o", "json")
	mustCode(t, r, 0)
	if len(r.stdout) < 5<<20 {
		t.Fatalf("runs -o json printed %d bytes; the test wants a listing over 4 MiB even as protobuf", len(r.stdout))
	}
	contains(t, "runs listing", r.stdout, "allows-by-default-45000.txt")
}
