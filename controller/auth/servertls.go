package auth

import (
	"crypto/tls"
	"log/slog"
)

// ServerTLS is the TLS configuration of a listener other than the gRPC one
// (the metrics listener): TLS 1.2 or newer, the certificate and key re-read
// when their files change, as for --listen.
func ServerTLS(certFile, keyFile string, log *slog.Logger) (*tls.Config, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return serverTLS(Config{CertFile: certFile, KeyFile: keyFile}, log)
}
