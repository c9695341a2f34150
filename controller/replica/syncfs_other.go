//go:build !linux

package replica

import "os"

// syncFS without syncfs(2): only the directory itself is synced.
func syncFS(d *os.File) { _ = d.Sync() }
