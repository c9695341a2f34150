package routine

import (
	"strings"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// FormatInfo is one row of the format table: a routine format, the driver
// that runs it and the file-name endings that mark it.
type FormatInfo struct {
	Format Format
	// Driver is the name of the driver that runs the format.
	Driver string
	// Extensions are the file-name endings, in discovery precedence.
	Extensions []string
	// Optional formats are only discovered when enabled (notebooks need
	// notebook_support).
	Optional bool
	// Wire is the format's value in the gRPC API.
	Wire decreev1.RoutineFormat
}

// Formats is the one table of routine formats, in discovery precedence for
// a bare name: NAME.ipynb (with notebook support), NAME.sh, then
// NAME.tree.json and NAME.tree.csv. Every other place that needs a routine
// extension or a format's driver reads it from here.
var Formats = []FormatInfo{
	{Format: FormatNotebook, Driver: "notebook", Extensions: []string{".ipynb"}, Optional: true, Wire: decreev1.RoutineFormat_ROUTINE_FORMAT_NOTEBOOK},
	{Format: FormatShell, Driver: "shell", Extensions: []string{".sh"}, Wire: decreev1.RoutineFormat_ROUTINE_FORMAT_SHELL},
	{Format: FormatTree, Driver: "tree", Extensions: []string{".tree.json", ".tree.csv"}, Wire: decreev1.RoutineFormat_ROUTINE_FORMAT_TREE},
}

// Info returns the table row of f (ok false for an unknown format).
func (f Format) Info() (FormatInfo, bool) {
	for _, fi := range Formats {
		if fi.Format == f {
			return fi, true
		}
	}
	return FormatInfo{}, false
}

// Driver returns the name of the driver that runs routines of this format.
func (f Format) Driver() string {
	if fi, ok := f.Info(); ok {
		return fi.Driver
	}
	return string(f)
}

// Wire returns the format's value in the gRPC API (UNSPECIFIED for an
// unknown format).
func (f Format) Wire() decreev1.RoutineFormat {
	fi, _ := f.Info()
	return fi.Wire
}

// DriverExtensions returns the routine file endings a driver runs (nil for
// a driver of no known format).
func DriverExtensions(driver string) []string {
	for _, fi := range Formats {
		if fi.Driver == driver {
			return append([]string(nil), fi.Extensions...)
		}
	}
	return nil
}

// SplitExt returns the stem, extension and format of a file name with a
// known routine extension, or ok=false. The stem is never empty.
func SplitExt(name string) (stem, ext string, f Format, ok bool) {
	for _, fi := range Formats {
		for _, e := range fi.Extensions {
			if strings.HasSuffix(name, e) && len(name) > len(e) {
				return strings.TrimSuffix(name, e), e, fi.Format, true
			}
		}
	}
	return "", "", "", false
}

// Stem returns name without a known routine extension ("develop.sh" ->
// "develop"); other names are returned as they are.
func Stem(name string) string {
	if stem, _, _, ok := SplitExt(name); ok {
		return stem
	}
	return name
}

// extensionOrder returns the extensions tried for a bare name, most
// preferred first; optional formats only when withOptional.
func extensionOrder(withOptional bool) []string {
	var out []string
	for _, fi := range Formats {
		if fi.Optional && !withOptional {
			continue
		}
		out = append(out, fi.Extensions...)
	}
	return out
}
