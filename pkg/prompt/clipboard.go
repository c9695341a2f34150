package prompt

import (
	"errors"
	"os"
	"os/exec"
)

// clipboardTools are the copy commands tried, in order, each with the
// environment variable that must be set for it to work ("" for none).
var clipboardTools = []struct {
	needs string
	argv  []string
}{
	{"WAYLAND_DISPLAY", []string{"wl-copy"}},
	{"DISPLAY", []string{"xclip", "-selection", "clipboard"}},
	{"DISPLAY", []string{"xsel", "--clipboard", "--input"}},
	{"", []string{"pbcopy"}},
}

// ErrNoClipboard is returned by Clipboard when no copy command can work.
var ErrNoClipboard = errors.New("no clipboard tool found: install wl-clipboard (Wayland), xclip or xsel (X11), or use --print and copy the text yourself")

// Clipboard returns the command line that copies its standard input to
// the clipboard: wl-copy in a Wayland session, xclip or xsel with an X
// display, pbcopy (macOS). getenv and look default to os.Getenv and
// exec.LookPath.
func Clipboard(getenv func(string) string, look func(string) (string, error)) ([]string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if look == nil {
		look = exec.LookPath
	}
	for _, t := range clipboardTools {
		if t.needs != "" && getenv(t.needs) == "" {
			continue
		}
		if p, err := look(t.argv[0]); err == nil {
			return append([]string{p}, t.argv[1:]...), nil
		}
	}
	return nil, ErrNoClipboard
}
