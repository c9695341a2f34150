// Command decree-supervisor is the attempt supervisor (pkg/supervisor) as
// a program of its own. Every routine, hook and router call runs under a
// supervisor process; started from this small program instead of the
// whole decreectl or decree-worker executable, one starts in about a
// quarter of the time. `make build` puts it beside them, where they look
// for it (and use it only when it speaks their protocol version; else
// they start themselves as the supervisor). It is not meant to be run by
// hand: `decree-supervisor --protocol` prints the protocol it speaks.
package main

import (
	"fmt"
	"os"

	"github.com/decreehq/decree/pkg/supervisor"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--protocol" {
		fmt.Println(supervisor.Protocol)
		return
	}
	// A supervisor started by a worker never gets here: the package's init
	// function serves it.
	fmt.Fprintln(os.Stderr, "decree-supervisor is started by decree's workers, not by hand (try --protocol)")
	os.Exit(2)
}
