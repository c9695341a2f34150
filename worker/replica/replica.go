// Package replica keeps a worker's replica of the controller's project
// tree: the workspace of a worker that does not share the controller's
// directory.
//
// Before an attempt, Sync brings the replica to the controller's manifest
// by content: it scans the replica (a stat cache under
// <workspace>/.decree/replica/ makes an unchanged tree cheap to scan), asks
// for the controller's manifest, and fetches only the contents it has
// nowhere locally (GetBlobs, in chunks; large files are streamed to a
// temporary file and renamed into place), copying the rest from local
// files; it deletes tracked files the controller no longer has, applies
// modes and symlinks, and leaves ignored paths alone (the same .gitignore
// and .decreeignore rules as the controller, see pkg/checkpoint/ignore).
// Every path from the controller is checked (pkg/wiremanifest): no "..",
// no absolute path, nothing under .decree/ or .git/, and nothing is ever
// written through a symlink or outside the workspace. Symlinks are data:
// a link is synced as a link with its exact target, also an absolute one or
// one leading out of the project (a virtualenv's bin/python ->
// /usr/bin/python3), and neither side ever follows one (files are opened
// with O_NOFOLLOW, directories checked with lstat).
//
// After the attempt, Scan gives the replica's manifest and Upload sends
// the contents the controller does not have yet (PutBlobs); the worker then
// completes the assignment with that manifest and the files Collect finds
// (follow-ups in .decree/inbox and .decree/outbox, artifacts in the run
// directory).
//
// Design note: the replica keeps no object store of its own. The
// controller's store holds every content of the manifests it publishes,
// so a replica only needs hashes (its stat cache) and its files.
package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/decreehq/decree/pkg/layout"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc"
)

// Defaults for Options.
const (
	DefaultMaxBlobSize = 1 << 30
	DefaultChunkSize   = 1 << 20
	// DefaultBatchBytes bounds the content asked for in one GetBlobs call.
	DefaultBatchBytes = 64 << 20
)

// Dir is the replica's private directory inside the workspace.
const Dir = layout.Dir + "/replica"

// Client is the part of the WorkerService a replica uses
// (decreev1.WorkerServiceClient satisfies it).
type Client interface {
	GetWorkspaceManifest(ctx context.Context, in *decreev1.GetWorkspaceManifestRequest, opts ...grpc.CallOption) (*decreev1.GetWorkspaceManifestResponse, error)
	GetBlobs(ctx context.Context, in *decreev1.GetBlobsRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[decreev1.GetBlobsResponse], error)
	PutBlobs(ctx context.Context, opts ...grpc.CallOption) (grpc.ClientStreamingClient[decreev1.PutBlobsRequest, decreev1.PutBlobsResponse], error)
}

// Options configure a Replica.
type Options struct {
	// Workers is the number of files hashed or written at once
	// (GOMAXPROCS, at least 4, when zero).
	Workers int
	// MaxBlobSize is the largest file uploaded (DefaultMaxBlobSize when
	// zero); a larger changed file fails the upload with advice.
	MaxBlobSize int64
	// ChunkSize is the size of upload chunks (DefaultChunkSize when zero).
	ChunkSize int
	// BatchBytes bounds one GetBlobs call (DefaultBatchBytes when zero).
	BatchBytes int64
	// Logger; nil discards.
	Logger *slog.Logger
}

// Replica is one workspace kept as a replica. Its methods must not be
// called concurrently (a worker runs one assignment at a time).
type Replica struct {
	root string // absolute, symlinks resolved
	dir  string // root/.decree/replica
	opts Options
	log  *slog.Logger

	mu    sync.Mutex
	cache *statCache
	// cacheDirty: cache holds entries its file lacks (see record).
	cacheDirty bool
}

// Open prepares the replica in workspace ws, creating its private
// directory.
func Open(ws string, opts Options) (*Replica, error) {
	abs, err := filepath.Abs(ws)
	if err != nil {
		return nil, fmt.Errorf("replica: workspace %q: %w", ws, err)
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("replica: workspace %s: %w", abs, err)
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("replica: workspace %s is not a directory", root)
	}
	if opts.Workers <= 0 {
		opts.Workers = max(runtime.GOMAXPROCS(0), 4)
	}
	if opts.MaxBlobSize <= 0 {
		opts.MaxBlobSize = DefaultMaxBlobSize
	}
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = DefaultChunkSize
	}
	if opts.BatchBytes <= 0 {
		opts.BatchBytes = DefaultBatchBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	dir := filepath.Join(root, filepath.FromSlash(Dir))
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return nil, fmt.Errorf("replica: create %s: %w", dir, err)
	}
	r := &Replica{root: root, dir: dir, opts: opts, log: opts.Logger}
	r.cache, err = loadStatCache(r.cachePath())
	if err != nil {
		r.log.Warn("replica stat cache unusable; the next scan hashes every file", "err", err)
	}
	return r, nil
}

// Root is the workspace directory (absolute, symlinks resolved).
func (r *Replica) Root() string { return r.root }

func (r *Replica) cachePath() string { return filepath.Join(r.dir, "statcache") }

// ErrDigestMismatch is wrapped when the controller's manifest is not the
// one the assignment names.
var ErrDigestMismatch = errors.New("workspace manifest digest mismatch")
