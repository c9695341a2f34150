//go:build !linux

package proc

import "os"

// growPipe does nothing where a pipe's size cannot be set (macOS).
func growPipe(*os.File, int) {}
