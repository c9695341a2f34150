package auth

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goodToken = "0123456789abcdef0123456789abcdef"

func writeToken(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadTokenFile(t *testing.T) {
	tests := []struct {
		name    string
		content string
		mode    os.FileMode
		want    string // token, or the error's text when wantErr
		wantErr bool
	}{
		{"owner only, trailing newline", goodToken + "\n", 0o600, goodToken, false},
		{"read-only", "  " + goodToken + "\r\n", 0o400, goodToken, false},
		{"group readable", goodToken, 0o640, goodToken, false},
		{"world readable", goodToken, 0o644, "mode 0644", true},
		{"world writable", goodToken, 0o602, "accessible to other users", true},
		{"others may execute", goodToken, 0o601, "chmod 600", true},
		{"empty", "\n", 0o600, "empty", true},
		{"too short", "abc", 0o600, "at least 16", true},
		{"two words", goodToken + " " + goodToken, 0o600, "not visible ASCII", true},
		{"non-ASCII", goodToken + "é", 0o600, "not visible ASCII", true},
		{"too large", strings.Repeat("a", 5000), 0o600, "larger than", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadTokenFile(writeToken(t, tc.content, tc.mode))
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("ReadTokenFile: %q, %v; want an error containing %q", got, err, tc.want)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ReadTokenFile: %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestReadTokenFileFollowsSymlinks(t *testing.T) {
	// Kubernetes mounts a Secret key as a symlink into ..data/; the
	// target's mode is what counts.
	target := writeToken(t, goodToken, 0o644)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadTokenFile(link); err == nil || !strings.Contains(err.Error(), "0644") {
		t.Fatalf("symlink to a world-readable file: %v, want refused", err)
	}
	if err := os.Chmod(target, 0o440); err != nil {
		t.Fatal(err)
	}
	if tok, err := ReadTokenFile(link); err != nil || tok != goodToken {
		t.Fatalf("symlink to a 0440 file: %q, %v", tok, err)
	}
	if _, err := ReadTokenFile(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a directory: %v, want refused", err)
	}
}

func TestResolveToken(t *testing.T) {
	fileTok := "file-" + goodToken
	envFileTok := "envfile-" + goodToken
	flagFile := writeToken(t, fileTok, 0o600)
	envFile := writeToken(t, envFileTok, 0o600)
	open := writeToken(t, goodToken, 0o644)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name    string
		flag    string
		env     map[string]string
		want    string
		wantErr string
	}{
		{"flag wins", flagFile, map[string]string{EnvTokenFile: envFile, EnvToken: goodToken}, fileTok, ""},
		{"env file before env value", "", map[string]string{EnvTokenFile: envFile, EnvToken: goodToken}, envFileTok, ""},
		{"env value", "", map[string]string{EnvToken: " " + goodToken + "\n"}, goodToken, ""},
		{"nothing", "", nil, "", ""},
		{"env file world readable", "", map[string]string{EnvTokenFile: open}, "", EnvTokenFile},
		{"env value too short", "", map[string]string{EnvToken: "short"}, "", EnvToken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveToken(tc.flag, env(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ResolveToken: %q, %v; want an error naming %s", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ResolveToken: %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestDialOptions(t *testing.T) {
	tests := []struct {
		name    string
		target  string
		o       ClientOptions
		wantErr string // "" means accepted
	}{
		{"unix socket needs nothing", "unix:///tmp/p/.decree/decree.sock", ClientOptions{}, ""},
		{"socket path needs nothing", "/tmp/p/.decree/decree.sock", ClientOptions{}, ""},
		{"TLS with a token", "decree.example.com:7443", ClientOptions{Token: goodToken}, ""},
		{"dns scheme", "dns:///decree.example.com:7443", ClientOptions{Token: goodToken}, ""},
		{"insecure to 127.0.0.1", "127.0.0.1:7443", ClientOptions{Token: goodToken, Insecure: true}, ""},
		{"insecure to localhost", "localhost:7443", ClientOptions{Token: goodToken, Insecure: true}, ""},
		{"insecure to ::1", "[::1]:7443", ClientOptions{Token: goodToken, Insecure: true}, ""},
		{"TCP without a token", "decree.example.com:7443", ClientOptions{}, "needs a token"},
		{"insecure to a remote host", "decree.example.com:7443", ClientOptions{Token: goodToken, Insecure: true}, "only to a loopback address"},
		{"insecure to a LAN address", "192.168.1.2:7443", ClientOptions{Token: goodToken, Insecure: true}, "clear text"},
		{"insecure with a CA", "127.0.0.1:7443", ClientOptions{Token: goodToken, Insecure: true, CAFile: "ca.crt"}, "cannot go with it"},
		{"no port", "decree.example.com", ClientOptions{Token: goodToken}, "want HOST:PORT"},
		{"missing CA file", "decree.example.com:7443", ClientOptions{Token: goodToken, CAFile: filepath.Join(t.TempDir(), "nope.crt")}, "read CA bundle"},
		{"cert without key", "decree.example.com:7443", ClientOptions{Token: goodToken, CertFile: "c.crt"}, "both --tls-cert and --tls-key"},
		{"short token", "decree.example.com:7443", ClientOptions{Token: "abc"}, "at least 16"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := DialOptions(tc.target, tc.o)
			if tc.wantErr == "" {
				if err != nil || len(opts) == 0 {
					t.Fatalf("DialOptions: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("DialOptions: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestTokenCredentials(t *testing.T) {
	md, err := TokenCredentials{Token: goodToken}.GetRequestMetadata(context.Background())
	if err != nil || md[MetadataKey] != "Bearer "+goodToken {
		t.Fatalf("metadata %v, %v", md, err)
	}
	if !(TokenCredentials{}).RequireTransportSecurity() || (TokenCredentials{AllowInsecure: true}).RequireTransportSecurity() {
		t.Fatal("RequireTransportSecurity must be true unless AllowInsecure")
	}
}

func TestIsLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.1.2.3": true, "::1": true, "[::1]": true, "localhost": true, "LOCALHOST": true,
		"": false, "0.0.0.0": false, "::": false, "10.0.0.1": false, "example.com": false, "localhost.example.com": false,
	} {
		if got := IsLoopbackHost(host); got != want {
			t.Errorf("IsLoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}
