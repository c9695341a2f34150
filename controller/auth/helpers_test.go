package auth

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
)

func metadataCtx(t *testing.T, kv ...string) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(c, kv...)
}
