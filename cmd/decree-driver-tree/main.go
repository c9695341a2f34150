// Command decree-driver-tree is decree's decision-tree driver, a go-plugin
// the worker launches when a routine is NAME.tree.csv or NAME.tree.json.
// `make build` puts it beside decreectl and decree-worker, where they look
// for it first (then PATH, then .decree/drivers/). It is not meant to be
// run by hand.
package main

import (
	"github.com/decreehq/decree/pkg/driver/plugin/sdk"
	"github.com/decreehq/decree/pkg/routine"
	"github.com/decreehq/decree/pkg/tree/treedriver"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	sdk.Serve(treedriver.New(), sdk.Options{
		Extensions: routine.DriverExtensions(treedriver.Name),
		Version:    version,
		Inspect:    treedriver.Inspect,
	})
}
