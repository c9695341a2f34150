// Package plugin hosts external routine drivers: binaries named
// decree-driver-NAME that speak decree.v1.DriverService over
// hashicorp/go-plugin's gRPC transport.
//
// The plugin's stdout carries go-plugin's handshake line, so routine output
// travels only inside the Execute stream; the plugin's stderr is copied to
// the host's logger. A plugin of a different ProtocolVersion, or a binary
// that is not a decree driver at all, is refused at launch with an error
// naming the binary. A plugin that dies during an execution ends that
// execution with ExitCode -1 and an error naming the driver.
//
// Plugins are written with the sdk subpackage, which runs every routine in
// its own process group and kills the group on Stop, when the host goes
// away, and when the plugin is told to shut down. Routines of a plugin are
// fenced like built-in ones: the host passes the attempt's lease deadline
// and its renewals (RenewLease), and a plugin whose host died exits at
// once (see HostFDEnv), so its routines' supervisors kill their trees.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// ProtocolVersion is the driver plugin protocol version; host and plugin
// must agree on it.
const ProtocolVersion = 1

// Handshake is the go-plugin handshake every decree driver uses.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "DECREE_DRIVER_PLUGIN",
	MagicCookieValue: "f3b1c7e2-decree-driver",
}

// PluginName is the key the driver service is dispensed under.
const PluginName = "driver"

// HostFDEnv names the environment variable that gives a plugin the
// descriptor of its host pipe: it reaches end-of-file when the host dies.
const HostFDEnv = "DECREE_DRIVER_HOST_FD"

// BinaryPrefix is the file-name prefix of driver binaries.
const BinaryPrefix = "decree-driver-"

// GRPCPlugin adapts DriverService to go-plugin. Impl is only needed on the
// plugin side.
type GRPCPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Impl decreev1.DriverServiceServer
}

// GRPCServer implements goplugin.GRPCPlugin.
func (p *GRPCPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	decreev1.RegisterDriverServiceServer(s, p.Impl)
	return nil
}

// GRPCClient implements goplugin.GRPCPlugin.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return decreev1.NewDriverServiceClient(c), nil
}

// PluginSet returns the plugin map both sides pass to go-plugin.
func PluginSet(impl decreev1.DriverServiceServer) goplugin.PluginSet {
	return goplugin.PluginSet{PluginName: &GRPCPlugin{Impl: impl}}
}

// SearchDirs returns where Find looks for driver binaries, in order: the
// directory of the running executable (the worker), then PATH (searched by
// Find), then <projectRoot>/.decree/drivers when projectRoot is set.
func SearchDirs(projectRoot string) []string {
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe))
	}
	dirs = append(dirs, "$PATH")
	if projectRoot != "" {
		dirs = append(dirs, layout.Path(projectRoot, layout.Drivers))
	}
	return dirs
}

// Find locates decree-driver-NAME in dirs ("$PATH" stands for every PATH
// directory) by the rules of Discover. The name must be a plain name.
func Find(name string, dirs []string) (string, error) {
	if err := fsutil.CheckName("driver", name); err != nil {
		return "", err
	}
	bin := BinaryPrefix + name
	var looked []string
	for _, d := range dirs {
		if d == "$PATH" {
			looked = append(looked, "PATH")
		} else {
			looked = append(looked, d)
		}
		for _, dir := range expandDirs([]string{d}) {
			p := filepath.Join(dir, bin)
			if isExecutable(p) {
				return p, nil
			}
			if _, err := os.Stat(p); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
				return "", fmt.Errorf("check driver binary %s: %w", p, err)
			}
		}
	}
	return "", fmt.Errorf("driver %q not found: no executable %s in %v; build or install it there", name, bin, looked)
}
