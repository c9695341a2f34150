package metrics

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decreehq/decree/pkg/auth/authtest"
)

func TestListenRules(t *testing.T) {
	dir := t.TempDir()
	tok := authtest.WriteFile(t, dir, "tok", []byte("secret-token-0123456789\n"))
	tests := []struct {
		name string
		cfg  ListenConfig
		want string // "" = valid
	}{
		{"loopback plain", ListenConfig{Addr: "127.0.0.1:0"}, ""},
		{"localhost plain with token", ListenConfig{Addr: "localhost:9464", TokenFile: tok}, ""},
		{"ipv6 loopback", ListenConfig{Addr: "[::1]:0"}, ""},
		{"all interfaces plain", ListenConfig{Addr: ":9464"}, "needs TLS"},
		{"public plain with token", ListenConfig{Addr: "0.0.0.0:9464", TokenFile: tok}, "needs TLS"},
		{"public TLS without token", ListenConfig{Addr: "0.0.0.0:9464", CertFile: "c", KeyFile: "k"}, "a token"},
		{"public TLS and token", ListenConfig{Addr: "0.0.0.0:9464", CertFile: "c", KeyFile: "k", TokenFile: tok}, ""},
		{"cert without key", ListenConfig{Addr: "127.0.0.1:0", CertFile: "c"}, "both"},
		{"no port", ListenConfig{Addr: "127.0.0.1"}, "HOST:PORT"},
		{"bad port", ListenConfig{Addr: "127.0.0.1:http"}, "port must be a number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

// TestListenerTokenAndTLS: over real HTTPS on loopback, a scrape without
// the token or with a wrong one is 401, with it 200; a plain-HTTP client
// gets nothing; a token file other users can read is refused.
func TestListenerTokenAndTLS(t *testing.T) {
	dir := t.TempDir()
	ca := authtest.NewCA(t, "metrics CA")
	cert, key := ca.Server(t).Write(t, dir, "srv")
	tok := authtest.WriteFile(t, dir, "tok", []byte("secret-token-0123456789\n"))
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "decree_up 1\n") })
	l, err := Listen(ListenConfig{Addr: "127.0.0.1:0", CertFile: cert, KeyFile: key, TokenFile: tok}, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	if !strings.HasPrefix(l.URL(), "https://127.0.0.1:") {
		t.Fatalf("URL %s", l.URL())
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(c *http.Client, url, auth string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		auth string
		code int
	}{
		{"", 401},
		{"Bearer wrong", 401},
		{"Basic c2VjcmV0", 401},
		{"Bearer secret-token-0123456789", 200},
	} {
		if code, body := get(client, l.URL(), tc.auth); code != tc.code {
			t.Errorf("auth %q: %d %s, want %d", tc.auth, code, body, tc.code)
		}
	}
	if code, _ := get(http.DefaultClient, strings.Replace(l.URL(), "https", "http", 1), "Bearer secret-token-0123456789"); code == 200 {
		t.Error("plain HTTP was served on a TLS listener")
	}

	open := filepath.Join(dir, "open.tok")
	if err := os.WriteFile(open, []byte("secret-token-0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(ListenConfig{Addr: "127.0.0.1:0", TokenFile: open}, h, nil); err == nil {
		t.Error("a token file readable by others was accepted")
	}
}
