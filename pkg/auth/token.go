package auth

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// MinTokenLen is the shortest token accepted: 16 characters. `openssl rand
// -hex 32` makes a good one (64 characters).
const MinTokenLen = 16

// maxTokenFileBytes bounds what ReadTokenFile reads.
const maxTokenFileBytes = 4 << 10

// ErrTokenFilePermissions is wrapped by ReadTokenFile when the file can be
// read (or written) by users other than its owner and group.
var ErrTokenFilePermissions = errors.New("token file is accessible to other users")

// ReadTokenFile reads a token from path: the file's content with surrounding
// white space (a trailing newline) removed. It refuses a file that other
// users may read or write (any of the mode's "other" bits set; owner- and
// group-only modes such as 0600, 0400 or 0440 are fine), a file that is not
// a regular file, and a content that CheckToken rejects. Symbolic links are
// followed (Kubernetes mounts Secrets through them) and the target's mode is
// what counts.
func ReadTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("token file %s is not a regular file (%s)", path, fi.Mode().Type())
	}
	if perm := fi.Mode().Perm(); perm&0o007 != 0 {
		return "", fmt.Errorf("%w: %s has mode %04o; restrict it with `chmod 600 %s` (or 640 for a group) and try again", ErrTokenFilePermissions, path, perm, path)
	}
	raw, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("read token file %s: %w", path, err)
	}
	if len(raw) > maxTokenFileBytes {
		return "", fmt.Errorf("token file %s is larger than %d bytes; it should hold one token on one line", path, maxTokenFileBytes)
	}
	tok := strings.TrimSpace(string(raw))
	if err := CheckToken(tok); err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	return tok, nil
}

// CheckToken accepts a token of at least MinTokenLen visible ASCII
// characters (no spaces: it travels in a gRPC header).
func CheckToken(tok string) error {
	if tok == "" {
		return errors.New("the token is empty; generate one with `openssl rand -hex 32`")
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("the token has a character that is not visible ASCII (byte %d); tokens are one word of printable characters, e.g. from `openssl rand -hex 32`", i)
		}
	}
	if len(tok) < MinTokenLen {
		return fmt.Errorf("the token is %d characters long; use at least %d (e.g. `openssl rand -hex 32`)", len(tok), MinTokenLen)
	}
	return nil
}

// ResolveToken finds a client's token: the file named by flagFile when it is
// not empty, else the file named by $DECREE_TOKEN_FILE, else the value of
// $DECREE_TOKEN, else "" (fine for a unix socket; DialOptions refuses TCP
// without a token). getenv is os.Getenv outside tests.
func ResolveToken(flagFile string, getenv func(string) string) (string, error) {
	if flagFile != "" {
		return ReadTokenFile(flagFile)
	}
	if f := getenv(EnvTokenFile); f != "" {
		tok, err := ReadTokenFile(f)
		if err != nil {
			return "", fmt.Errorf("%s: %w", EnvTokenFile, err)
		}
		return tok, nil
	}
	if v := strings.TrimSpace(getenv(EnvToken)); v != "" {
		if err := CheckToken(v); err != nil {
			return "", fmt.Errorf("%s: %w", EnvToken, err)
		}
		return v, nil
	}
	return "", nil
}
