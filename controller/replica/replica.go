// Package replica serves the controller's side of replica workspaces: a
// worker whose workspace is not the controller's project tree keeps a copy
// (a replica) that it brings to the controller's manifest before each
// attempt, and whose changes come back afterwards.
//
// The flow for one attempt:
//
//  1. The pipeline snapshots the project tree and Publishes the manifest
//     (with the read-only context files under .decree/: specs, prompts,
//     routines, configuration, which replicas receive but never send back);
//     its digest (see pkg/wiremanifest) goes into
//     Assignment.manifest_digest. Publishing costs O(changes) since the
//     previous publication (see Publish).
//  2. The worker asks for the manifest (Manifest, by lease token), fetches
//     the contents it lacks (SendBlobs: only hashes listed in that
//     manifest are served; nothing else on the controller's disk can be
//     reached), runs the routine, uploads the new contents (ReceiveBlobs:
//     every blob's SHA-256 is checked before it is stored, a blob larger
//     than the limit is refused, and an upload cut short leaves nothing
//     behind) and completes with its tree's manifest.
//  3. The pipeline Materializes that manifest into the project tree: every
//     path whose entry changed relative to the published manifest is
//     written from the object store (atomically, confined to the root,
//     never through a symlink; symlinks are data and are written as links
//     with their exact target, absolute or leading out of the root), paths
//     the worker deleted are removed, modes applied, and every written
//     path is verified against its hash. DeliverFiles puts returned
//     follow-ups into the inbox/outbox and artifacts into the run
//     directory.
//
// Reverts only ever happen on the controller's tree; a replica catches up
// at its next sync because only differing files travel.
package replica

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/pkg/checkpoint"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// Defaults for Options.
const (
	DefaultMaxBlobSize = 1 << 30
	DefaultChunkSize   = 1 << 20
)

// Domain errors; the gRPC layer maps them to status codes.
var (
	// ErrInvalid: the request is malformed (bad hash, chunks out of order).
	ErrInvalid = errors.New("invalid replica request")
	// ErrForbidden: a blob outside the lease's manifest was asked for.
	ErrForbidden = errors.New("blob not in the workspace manifest of this lease")
	// ErrNoManifest: the lease's assignment carries no workspace manifest
	// (in-place work, a router call, or a manifest no longer published).
	ErrNoManifest = errors.New("no workspace manifest for this lease")
	// ErrMissing: content a materialisation needs was never uploaded.
	ErrMissing = errors.New("content missing from the controller")
)

// Leases looks up active leases (lease.Manager does).
type Leases interface {
	Active(token string) (lease.AssignmentView, error)
}

// Options configure a Service.
type Options struct {
	// Root is the controller's project tree.
	Root string
	// Objects is the controller's checkpoint object store; published
	// contents are read from it and uploads go into it.
	Objects *checkpoint.Store
	// Leases authorises calls by lease token.
	Leases Leases
	// MaxBlobSize is the largest file a worker may upload
	// (DefaultMaxBlobSize when zero).
	MaxBlobSize int64
	// ChunkSize is the size of the chunks GetBlobs sends
	// (DefaultChunkSize when zero).
	ChunkSize int
	// Logger; nil discards.
	Logger *slog.Logger
}

// Service is the controller's replica service. It is safe for concurrent
// use.
type Service struct {
	opts Options
	log  *slog.Logger

	// pubMu serialises Publish; last is the state it built last, the
	// start of the next one (kept after its release: one manifest).
	pubMu sync.Mutex
	last  *pubState

	mu        sync.Mutex
	published map[string]*published
}

// published is one manifest workers may sync to.
type published struct {
	st   *pubState
	refs int

	once     sync.Once
	list     []*decreev1.FileEntry // st's entries, listed when first asked
	full     map[string]string     // every content -> a path, when needed
	fullOnce sync.Once
}

// path returns a path of the published tree whose regular file has
// content sum.
func (p *published) path(sum string) (string, bool) {
	if rel, ok := p.st.index.overlay[sum]; ok && p.st.holds(rel, sum) {
		return rel, true
	}
	if rel, ok := p.st.index.base[sum]; ok && p.st.holds(rel, sum) {
		return rel, true
	}
	p.fullOnce.Do(func() { p.full = newBlobIndex(p.st).base })
	rel, ok := p.full[sum]
	return rel, ok
}

// New returns a Service.
func New(opts Options) (*Service, error) {
	if opts.Root == "" || opts.Objects == nil || opts.Leases == nil {
		return nil, errors.New("replica: Options.Root, Objects and Leases are required")
	}
	if opts.MaxBlobSize <= 0 {
		opts.MaxBlobSize = DefaultMaxBlobSize
	}
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = DefaultChunkSize
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{opts: opts, log: log, published: map[string]*published{}}, nil
}

// Publish makes the project tree's manifest tree available to workers,
// together with the read-only context files under .decree/ (specs,
// prompts, routines, router guide, configuration), until release is called
// (publishing the same content twice counts references). The digest covers
// both. Materialize takes tree itself as its base. tree must not be
// modified afterwards (a snapshot's manifest never is).
//
// Publishing costs O(changes) since the previous Publish: the entries,
// bucket sums and digest of the previous publication are kept, and only
// the paths that changed since are converted and rehashed (for the
// snapshots of a served tree, checkpoint.ChangedSince names them; for
// another manifest the two trees are compared, which reads both maps but
// converts only what differs); context files are read again only when
// their stat data changed.
func (s *Service) Publish(tree *checkpoint.Manifest) (digest string, release func(), err error) {
	s.pubMu.Lock()
	var prevCtx map[string]ctxFile
	if s.last != nil {
		prevCtx = s.last.ctx
	}
	ctx, err := s.contextFiles(prevCtx)
	if err != nil {
		s.pubMu.Unlock()
		return "", nil, fmt.Errorf("publish workspace manifest: %w", err)
	}
	st := buildState(s.last, tree, ctx)
	s.last = st
	s.pubMu.Unlock()

	digest = st.digest
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.published[digest]
	if p == nil {
		p = &published{st: st}
		s.published[digest] = p
	}
	p.refs++
	var once sync.Once
	return digest, func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if p.refs--; p.refs == 0 {
				delete(s.published, digest)
			}
		})
	}, nil
}

// lookup returns the manifest published for the lease's assignment.
func (s *Service) lookup(token string) (*published, string, error) {
	view, err := s.opts.Leases.Active(token)
	if err != nil {
		return nil, "", err
	}
	if view.ManifestDigest == "" {
		return nil, "", fmt.Errorf("%w: the assignment of %s names no manifest digest (router calls and in-place work are not synced)", ErrNoManifest, orDash(view.MessageID))
	}
	s.mu.Lock()
	p := s.published[view.ManifestDigest]
	s.mu.Unlock()
	if p == nil {
		return nil, "", fmt.Errorf("%w: manifest %s is no longer published (the attempt ended)", ErrNoManifest, view.ManifestDigest)
	}
	return p, view.ManifestDigest, nil
}

// Manifest returns the manifest a lease's replica must match.
func (s *Service) Manifest(token string) (*decreev1.GetWorkspaceManifestResponse, error) {
	p, digest, err := s.lookup(token)
	if err != nil {
		return nil, err
	}
	p.once.Do(func() { p.list = p.st.entries() })
	return &decreev1.GetWorkspaceManifestResponse{Digest: digest, Files: p.list}, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
