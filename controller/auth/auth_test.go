package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	pauth "github.com/decreehq/decree/pkg/auth"
	"github.com/decreehq/decree/pkg/auth/authtest"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

const (
	clientToken = "client-token-0123456789abcdef"
	workerToken = "worker-token-0123456789abcdef"
)

// The services behind the guard answer with fixed, recognisable values so
// a test can tell a call really reached them.
type ctlServer struct {
	decreev1.UnimplementedControllerServiceServer
}

func (ctlServer) GetStatus(context.Context, *decreev1.GetStatusRequest) (*decreev1.GetStatusResponse, error) {
	return &decreev1.GetStatusResponse{ProjectDir: "/reached/controller"}, nil
}

func (ctlServer) WatchEvents(_ *decreev1.WatchEventsRequest, s grpc.ServerStreamingServer[decreev1.WatchEventsResponse]) error {
	return s.Send(&decreev1.WatchEventsResponse{Event: &decreev1.Event{Sequence: 42}})
}

// WatchLogs sends one response, so the client knows it was admitted, and
// holds the call open until the client ends it.
func (ctlServer) WatchLogs(_ *decreev1.WatchLogsRequest, s grpc.ServerStreamingServer[decreev1.WatchLogsResponse]) error {
	if err := s.Send(&decreev1.WatchLogsResponse{}); err != nil {
		return err
	}
	<-s.Context().Done()
	return s.Context().Err()
}

type wkServer struct {
	decreev1.UnimplementedWorkerServiceServer
}

func (wkServer) Heartbeat(context.Context, *decreev1.HeartbeatRequest) (*decreev1.HeartbeatResponse, error) {
	return &decreev1.HeartbeatResponse{StopLeases: []string{"reached-worker"}}, nil
}

// fixture is a CA, server and client certificates and token files in a
// temporary directory.
type fixture struct {
	dir                          string
	ca                           *authtest.CA
	caFile                       string
	certFile, keyFile            string
	clientCert, clientKey        string
	clientTokFile, workerTokFile string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	ca := authtest.NewCA(t, "decree test CA")
	f := &fixture{dir: dir, ca: ca, caFile: authtest.WriteFile(t, dir, "ca.crt", ca.CertPEM)}
	f.certFile, f.keyFile = ca.Server(t).Write(t, dir, "server")
	f.clientCert, f.clientKey = ca.Client(t, "decreectl").Write(t, dir, "client")
	f.clientTokFile = authtest.WriteFile(t, dir, "client.token", []byte(clientToken+"\n"))
	f.workerTokFile = authtest.WriteFile(t, dir, "worker.token", []byte(workerToken+"\n"))
	return f
}

func (f *fixture) config() Config {
	return Config{
		Listen:   []string{"127.0.0.1:0"},
		CertFile: f.certFile, KeyFile: f.keyFile,
		ClientTokenFile: f.clientTokFile, WorkerTokenFile: f.workerTokFile,
	}
}

// serve starts a real gRPC server with the guard and limits on its TCP
// listener(s) and, when unixSock is not empty, on a unix socket too. It
// returns the TCP address.
func serve(t *testing.T, cfg Config, unixSock string) string {
	t.Helper()
	g, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := grpc.NewServer(append(Limits(), g.ServerOptions()...)...)
	decreev1.RegisterControllerServiceServer(srv, ctlServer{})
	decreev1.RegisterWorkerServiceServer(srv, wkServer{})
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	lis, err := g.Listen()
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	if unixSock != "" {
		ul, err := net.Listen("unix", unixSock)
		if err != nil {
			t.Fatal(err)
		}
		lis = append(lis, ul)
	}
	for _, l := range lis {
		go srv.Serve(l)
	}
	t.Cleanup(srv.Stop)
	return lis[0].Addr().String()
}

func dial(t *testing.T, target string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// dialAs connects the way decreectl and decree-worker do, through
// pkg/auth.DialOptions.
func dialAs(t *testing.T, target string, o pauth.ClientOptions) *grpc.ClientConn {
	t.Helper()
	opts, err := pauth.DialOptions(target, o)
	if err != nil {
		t.Fatalf("DialOptions: %v", err)
	}
	return dial(t, target, opts...)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// callBoth calls one unary and one streaming method of each service and
// returns the four codes: controller unary, controller stream, worker unary.
func callBoth(t *testing.T, conn *grpc.ClientConn) (ctlUnary, ctlStream, wkUnary codes.Code) {
	t.Helper()
	c := decreev1.NewControllerServiceClient(conn)
	st, err := c.GetStatus(ctx(t), &decreev1.GetStatusRequest{})
	if err == nil && st.GetProjectDir() != "/reached/controller" {
		t.Fatalf("GetStatus answered %q, not the test service", st.GetProjectDir())
	}
	ctlUnary = status.Code(err)
	ws, err := c.WatchEvents(ctx(t), &decreev1.WatchEventsRequest{})
	if err == nil {
		var ev *decreev1.WatchEventsResponse
		ev, err = ws.Recv()
		if err == nil && ev.GetEvent().GetSequence() != 42 {
			t.Fatalf("WatchEvents sent %v, not the test event", ev)
		}
	}
	ctlStream = status.Code(err)
	hb, err := decreev1.NewWorkerServiceClient(conn).Heartbeat(ctx(t), &decreev1.HeartbeatRequest{})
	if err == nil && (len(hb.GetStopLeases()) != 1 || hb.GetStopLeases()[0] != "reached-worker") {
		t.Fatalf("Heartbeat answered %v, not the test service", hb)
	}
	return ctlUnary, ctlStream, status.Code(err)
}

func TestTokensAndRoles(t *testing.T) {
	f := newFixture(t)
	addr := serve(t, f.config(), "")
	pool, err := pauth.LoadCertPool(f.caFile)
	if err != nil {
		t.Fatal(err)
	}
	tlsOnly := grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool}))
	withToken := func(tok string) *grpc.ClientConn {
		return dial(t, addr, tlsOnly, grpc.WithPerRPCCredentials(pauth.TokenCredentials{Token: tok}))
	}
	tests := []struct {
		name               string
		conn               *grpc.ClientConn
		ctl, ctlStream, wk codes.Code
	}{
		{"no token", dial(t, addr, tlsOnly), codes.Unauthenticated, codes.Unauthenticated, codes.Unauthenticated},
		{"wrong token", withToken("not-the-token-0123456789"), codes.Unauthenticated, codes.Unauthenticated, codes.Unauthenticated},
		{"token with a wrong length", withToken(clientToken + "x"), codes.Unauthenticated, codes.Unauthenticated, codes.Unauthenticated},
		{"client token", withToken(clientToken), codes.OK, codes.OK, codes.PermissionDenied},
		{"worker token", withToken(workerToken), codes.PermissionDenied, codes.PermissionDenied, codes.OK},
		{"through DialOptions as a client", dialAs(t, addr, pauth.ClientOptions{Token: clientToken, CAFile: f.caFile}), codes.OK, codes.OK, codes.PermissionDenied},
		{"through DialOptions as a worker", dialAs(t, addr, pauth.ClientOptions{Token: workerToken, CAFile: f.caFile}), codes.PermissionDenied, codes.PermissionDenied, codes.OK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctl, ctlStream, wk := callBoth(t, tc.conn)
			if ctl != tc.ctl || ctlStream != tc.ctlStream || wk != tc.wk {
				t.Errorf("codes (controller unary, controller stream, worker) = %v, %v, %v; want %v, %v, %v",
					ctl, ctlStream, wk, tc.ctl, tc.ctlStream, tc.wk)
			}
		})
	}
}

func TestRawBearerHeader(t *testing.T) {
	// The header format is part of the API for other languages: check a
	// hand-made "authorization" value, not only TokenCredentials.
	f := newFixture(t)
	cfg := f.config()
	cfg.CertFile, cfg.KeyFile, cfg.Insecure = "", "", true
	addr := serve(t, cfg, "")
	conn := dial(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	c := decreev1.NewControllerServiceClient(conn)
	for _, tc := range []struct {
		header string
		want   codes.Code
	}{
		{"Bearer " + clientToken, codes.OK},
		{"bearer " + clientToken, codes.OK},
		{clientToken, codes.Unauthenticated},
		{"Basic " + clientToken, codes.Unauthenticated},
		{"Bearer ", codes.Unauthenticated},
	} {
		ctx := metadataCtx(t, pauth.MetadataKey, tc.header)
		_, err := c.GetStatus(ctx, &decreev1.GetStatusRequest{})
		if status.Code(err) != tc.want {
			t.Errorf("authorization %q: %v, want %v", tc.header, err, tc.want)
		}
	}
}

func TestHealthOpenReflectionNeedsToken(t *testing.T) {
	f := newFixture(t)
	addr := serve(t, f.config(), "")
	pool, _ := pauth.LoadCertPool(f.caFile)
	anon := dial(t, addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	if _, err := healthpb.NewHealthClient(anon).Check(ctx(t), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health without a token: %v, want it answered", err)
	}
	listServices := func(conn *grpc.ClientConn) ([]string, error) {
		s, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx(t))
		if err != nil {
			return nil, err
		}
		// When the server ends the stream first, Send says io.EOF and
		// Recv gives the status.
		if err := s.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil && err != io.EOF {
			return nil, err
		}
		r, err := s.Recv()
		if err != nil {
			return nil, err
		}
		var names []string
		for _, svc := range r.GetListServicesResponse().GetService() {
			names = append(names, svc.GetName())
		}
		return names, nil
	}
	if _, err := listServices(anon); status.Code(err) != codes.Unauthenticated {
		t.Errorf("reflection without a token: %v, want Unauthenticated", err)
	}
	for _, tok := range []string{clientToken, workerToken} {
		names, err := listServices(dialAs(t, addr, pauth.ClientOptions{Token: tok, CAFile: f.caFile}))
		if err != nil {
			t.Fatalf("reflection with a token: %v", err)
		}
		if !strings.Contains(strings.Join(names, " "), "decree.v1.WorkerService") {
			t.Errorf("reflection listed %v, want decree.v1.WorkerService among them", names)
		}
	}
}

func TestMutualTLS(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	cfg.ClientCAFile = f.caFile
	addr := serve(t, cfg, "")

	with := dialAs(t, addr, pauth.ClientOptions{Token: clientToken, CAFile: f.caFile, CertFile: f.clientCert, KeyFile: f.clientKey})
	if _, err := decreev1.NewControllerServiceClient(with).GetStatus(ctx(t), &decreev1.GetStatusRequest{}); err != nil {
		t.Errorf("with a client certificate: %v", err)
	}
	without := dialAs(t, addr, pauth.ClientOptions{Token: clientToken, CAFile: f.caFile})
	_, err := decreev1.NewControllerServiceClient(without).GetStatus(ctx(t), &decreev1.GetStatusRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("without a client certificate: %v, want the handshake refused (Unavailable)", err)
	}
	// A certificate from another CA is refused as well.
	other := authtest.NewCA(t, "stranger CA").Client(t, "stranger")
	oc, ok := other.Write(t, f.dir, "stranger")
	foreign := dialAs(t, addr, pauth.ClientOptions{Token: clientToken, CAFile: f.caFile, CertFile: oc, KeyFile: ok})
	_, err = decreev1.NewControllerServiceClient(foreign).GetStatus(ctx(t), &decreev1.GetStatusRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("with a certificate from another CA: %v, want the handshake refused (Unavailable)", err)
	}
}

func TestClientRefusesUnknownServerCA(t *testing.T) {
	f := newFixture(t)
	addr := serve(t, f.config(), "")
	strangerCA := authtest.WriteFile(t, f.dir, "stranger-ca.crt", authtest.NewCA(t, "stranger").CertPEM)
	conn := dialAs(t, addr, pauth.ClientOptions{Token: clientToken, CAFile: strangerCA})
	_, err := decreev1.NewControllerServiceClient(conn).GetStatus(ctx(t), &decreev1.GetStatusRequest{})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a server certificate from an unknown CA: %v, want Unavailable naming the certificate", err)
	}
}

func TestInsecureLoopback(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	cfg.CertFile, cfg.KeyFile, cfg.Insecure = "", "", true
	addr := serve(t, cfg, "")
	ctl, ctlStream, wk := callBoth(t, dialAs(t, addr, pauth.ClientOptions{Token: workerToken, Insecure: true}))
	if ctl != codes.PermissionDenied || ctlStream != codes.PermissionDenied || wk != codes.OK {
		t.Errorf("worker token over plain loopback TCP: %v %v %v; want PermissionDenied PermissionDenied OK", ctl, ctlStream, wk)
	}
	anon := dial(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if _, _, wk := callBoth(t, anon); wk != codes.Unauthenticated {
		t.Errorf("no token over plain loopback TCP: %v, want Unauthenticated (tokens stay required)", wk)
	}
}

func TestUnixSocketNeedsNoToken(t *testing.T) {
	f := newFixture(t)
	sock := filepath.Join(shortTempDir(t), "d.sock")
	serve(t, f.config(), sock)
	ctl, ctlStream, wk := callBoth(t, dialAs(t, "unix://"+sock, pauth.ClientOptions{}))
	if ctl != codes.OK || ctlStream != codes.OK || wk != codes.OK {
		t.Errorf("unix socket without a token: %v %v %v, want all OK", ctl, ctlStream, wk)
	}
}

// shortTempDir is a temporary directory with a path short enough for a
// unix socket (108 bytes at most).
func shortTempDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "da")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestCertificateReload(t *testing.T) {
	f := newFixture(t)
	addr := serve(t, f.config(), "")
	get := func(caFile string) error {
		conn := dialAs(t, addr, pauth.ClientOptions{Token: clientToken, CAFile: caFile})
		_, err := decreev1.NewControllerServiceClient(conn).GetStatus(ctx(t), &decreev1.GetStatusRequest{})
		return err
	}
	if err := get(f.caFile); err != nil {
		t.Fatalf("before the renewal: %v", err)
	}
	ca2 := authtest.NewCA(t, "renewed CA")
	ca2File := authtest.WriteFile(t, f.dir, "ca2.crt", ca2.CertPEM)
	pair := ca2.Server(t)
	// Write the new pair and make sure the modification times differ.
	authtest.WriteFile(t, f.dir, "server.crt", pair.CertPEM)
	authtest.WriteFile(t, f.dir, "server.key", pair.KeyPEM)
	later := time.Now().Add(2 * time.Second)
	os.Chtimes(f.certFile, later, later)
	os.Chtimes(f.keyFile, later, later)
	if err := get(ca2File); err != nil {
		t.Errorf("after the renewal, a client trusting the new CA: %v", err)
	}
	if err := get(f.caFile); status.Code(err) != codes.Unavailable {
		t.Errorf("after the renewal, a client trusting only the old CA: %v, want Unavailable", err)
	}
}

func TestConstantTimeMatch(t *testing.T) {
	f := newFixture(t)
	g, err := New(f.config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]Role{
		clientToken: RoleClient, workerToken: RoleWorker,
		"": RoleNone, clientToken[:len(clientToken)-1]: RoleNone, strings.ToUpper(clientToken): RoleNone,
	} {
		if got := g.match(tok); got != want {
			t.Errorf("match(%q) = %v, want %v", tok, got, want)
		}
	}
	// A role without a token file matches nothing, even the empty digest.
	cfg := f.config()
	cfg.WorkerTokenFile = ""
	g, err = New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.match(workerToken); got != RoleNone {
		t.Errorf("worker token with no --worker-token-file: %v, want none", got)
	}
}

func TestNewRefusesBadFiles(t *testing.T) {
	f := newFixture(t)
	worldReadable := authtest.WriteFile(t, f.dir, "open.token", []byte(clientToken))
	if err := os.Chmod(worldReadable, 0o644); err != nil {
		t.Fatal(err)
	}
	groupReadable := authtest.WriteFile(t, f.dir, "group.token", []byte(clientToken))
	if err := os.Chmod(groupReadable, 0o640); err != nil {
		t.Fatal(err)
	}
	sameToken := authtest.WriteFile(t, f.dir, "same.token", []byte(workerToken))
	short := authtest.WriteFile(t, f.dir, "short.token", []byte("abc\n"))
	garbage := authtest.WriteFile(t, f.dir, "garbage.crt", []byte("not a certificate"))
	tests := []struct {
		name string
		edit func(*Config)
		want string // "" means New succeeds
	}{
		{"world-readable client token", func(c *Config) { c.ClientTokenFile = worldReadable }, "mode 0644"},
		{"world-readable worker token", func(c *Config) { c.WorkerTokenFile = worldReadable }, "chmod 600"},
		{"group-readable token is fine", func(c *Config) { c.ClientTokenFile = groupReadable }, ""},
		{"missing token file", func(c *Config) { c.ClientTokenFile = filepath.Join(f.dir, "nope") }, "no such file"},
		{"short token", func(c *Config) { c.ClientTokenFile = short }, "at least 16"},
		{"both roles with one token", func(c *Config) { c.ClientTokenFile = sameToken }, "same token"},
		{"garbage certificate", func(c *Config) { c.CertFile = garbage }, "load TLS certificate"},
		{"garbage client CA", func(c *Config) { c.ClientCAFile = garbage }, "no PEM certificate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := f.config()
			tc.edit(&cfg)
			_, err := New(cfg, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tok := func(c Config) Config { c.ClientTokenFile, c.WorkerTokenFile = "c", "w"; return c }
	tlsOn := func(c Config) Config { c.CertFile, c.KeyFile = "s.crt", "s.key"; return c }
	tests := []struct {
		name string
		cfg  Config
		want string // "" means valid
	}{
		{"unix socket only", Config{}, ""},
		{"TLS on every interface", tlsOn(tok(Config{Listen: []string{"0.0.0.0:7443"}})), ""},
		{"TLS on a host name", tlsOn(tok(Config{Listen: []string{"decree.example.com:7443"}})), ""},
		{"insecure on 127.0.0.1", tok(Config{Listen: []string{"127.0.0.1:0"}, Insecure: true}), ""},
		{"insecure on ::1", tok(Config{Listen: []string{"[::1]:7443"}, Insecure: true}), ""},
		{"insecure on localhost", tok(Config{Listen: []string{"localhost:7443"}, Insecure: true}), ""},
		{"only a worker token", Config{Listen: []string{"127.0.0.1:0"}, Insecure: true, WorkerTokenFile: "w"}, ""},
		{"0.0.0.0 without TLS", tok(Config{Listen: []string{"0.0.0.0:7443"}}), "refusing to listen on a non-loopback address without TLS"},
		{"all interfaces without TLS", tok(Config{Listen: []string{":7443"}}), "non-loopback"},
		{"a LAN address without TLS", tok(Config{Listen: []string{"192.168.1.10:7443"}}), "non-loopback"},
		{"a host name without TLS", tok(Config{Listen: []string{"decree.example.com:7443"}}), "non-loopback"},
		{"insecure on 0.0.0.0", tok(Config{Listen: []string{"0.0.0.0:7443"}, Insecure: true}), "--insecure allows plain TCP only on a loopback address"},
		{"insecure on a second, public address", tok(Config{Listen: []string{"127.0.0.1:1", "10.0.0.1:2"}, Insecure: true}), "10.0.0.1:2"},
		{"loopback without TLS or --insecure", tok(Config{Listen: []string{"127.0.0.1:7443"}}), "explicit --insecure"},
		{"insecure with TLS", tlsOn(tok(Config{Listen: []string{"127.0.0.1:0"}, Insecure: true})), "cannot go with --tls-cert"},
		{"cert without key", tok(Config{Listen: []string{"0.0.0.0:1"}, CertFile: "s.crt"}), "both --tls-cert and --tls-key"},
		{"client CA without TLS", tok(Config{Listen: []string{"127.0.0.1:0"}, Insecure: true, ClientCAFile: "ca"}), "needs a server certificate"},
		{"no tokens", tlsOn(Config{Listen: []string{"0.0.0.0:7443"}}), "needs tokens"},
		{"one file for both roles", tlsOn(Config{Listen: []string{"0.0.0.0:7443"}, ClientTokenFile: "t", WorkerTokenFile: "t"}), "different tokens"},
		{"TLS flags without --listen", tlsOn(Config{}), "add --listen"},
		{"no port", tlsOn(tok(Config{Listen: []string{"0.0.0.0"}})), "want HOST:PORT"},
		{"named port", tlsOn(tok(Config{Listen: []string{"0.0.0.0:https"}})), "must be a number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// The certificate presented to clients chains to the CA (sanity check of
// the fixture, so a TLS failure elsewhere is not a fixture bug).
func TestFixtureChains(t *testing.T) {
	f := newFixture(t)
	pair, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool, _ := pauth.LoadCertPool(f.caFile)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost"}); err != nil {
		t.Fatal(err)
	}
}
