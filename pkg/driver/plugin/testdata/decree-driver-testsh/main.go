// Command decree-driver-testsh is a test driver plugin: the shell driver
// served through the plugin sdk, with two test hooks.
//
//   - DECREE_TEST_PROTOCOL_VERSION=N makes it speak protocol version N.
//   - A routine parameter crash_file=PATH makes the plugin exit abruptly
//     (os.Exit, no cleanup) as soon as PATH exists.
package main

import (
	"context"
	"os"
	"strconv"
	"time"

	"github.com/decreehq/decree/pkg/driver"
	"github.com/decreehq/decree/pkg/driver/plugin"
	"github.com/decreehq/decree/pkg/driver/plugin/sdk"
	"github.com/decreehq/decree/pkg/driver/shell"
	"github.com/decreehq/decree/pkg/routine"
)

type testDriver struct{ shell.Driver }

func (d *testDriver) Name() string { return "testsh" }

func (d *testDriver) Start(ctx context.Context, cfg driver.TaskConfig) (driver.Handle, error) {
	h, err := d.Driver.Start(ctx, cfg)
	if err == nil && cfg.Params["crash_file"] != "" {
		go func() {
			for {
				if _, err := os.Stat(cfg.Params["crash_file"]); err == nil {
					os.Exit(3)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	return h, err
}

func main() {
	if v := os.Getenv("DECREE_TEST_PROTOCOL_VERSION"); v != "" {
		n, _ := strconv.Atoi(v)
		plugin.Handshake.ProtocolVersion = uint(n)
	}
	sdk.Serve(&testDriver{}, sdk.Options{
		Extensions: []string{".testsh"},
		Version:    "test",
		Inspect: func(path string) (string, []routine.Param, error) {
			b, err := os.ReadFile(path)
			if err != nil {
				return "", nil, err
			}
			return routine.ShellDescription(b), routine.Custom(routine.ShellParams(b)), nil
		},
	})
}
