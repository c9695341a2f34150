package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
)

// RequestKeep is how long a submission's idempotency key is remembered.
const RequestKeep = 7 * 24 * time.Hour

// MaxRequestIDLen is the longest idempotency key accepted.
const MaxRequestIDLen = 128

// ErrRequestMismatch is returned (wrapped) when an idempotency key comes
// back with a different submission.
var ErrRequestMismatch = errors.New("idempotency key reused for a different request")

// Request records one submission made with an idempotency key, in
// .decree/requests/<sha256 of the key>.json.
//
// The record is written twice: before the message is created (Chain set,
// MessageID empty: the chain id reserved for it) and after (MessageID
// set). A controller that died between the two finds the pending record on
// the retry; FindChainRoot then says whether the message made it into the
// project, so the retry neither loses it nor queues it twice.
type Request struct {
	Key string `json:"key"`
	// Digest identifies the submission (name, body and fields), so a key
	// reused for something else is refused.
	Digest    string    `json:"digest"`
	Chain     string    `json:"chain"`
	MessageID string    `json:"message_id,omitempty"`
	File      string    `json:"file,omitempty"`
	Sequence  uint64    `json:"event_sequence,omitempty"`
	Created   time.Time `json:"created"`
	// Response is the first call's answer as the API encoded it (opaque
	// to the store), so a replay returns exactly that.
	Response json.RawMessage `json:"response,omitempty"`
}

// CheckRequestID validates an idempotency key: 1 to 128 printable ASCII
// characters (0x20 to 0x7e: space included). Keys are stored under their
// SHA-256, so no character of them reaches a file name.
func CheckRequestID(key string) error {
	if len(key) > MaxRequestIDLen {
		return fmt.Errorf("request_id is %d characters long; at most %d are allowed", len(key), MaxRequestIDLen)
	}
	for _, r := range key {
		if r < 0x20 || r > 0x7e {
			return fmt.Errorf("request_id %q contains %q; use printable ASCII, space included (a UUID, say)", key, r)
		}
	}
	return nil
}

func (s *Store) requestPath(key string) string {
	sum := sha256.Sum256([]byte(key))
	return s.path(layout.Requests, hex.EncodeToString(sum[:])+".json")
}

// LookupRequest returns the record of key; ok is false when there is none
// (or it is older than RequestKeep).
func (s *Store) LookupRequest(key string) (Request, bool, error) {
	b, err := os.ReadFile(s.requestPath(key))
	if errors.Is(err, fs.ErrNotExist) {
		return Request{}, false, nil
	}
	if err != nil {
		return Request{}, false, fmt.Errorf("read the record of request_id %q: %w", key, err)
	}
	var r Request
	if err := json.Unmarshal(b, &r); err != nil || r.Key != key {
		return Request{}, false, fmt.Errorf("%w: the record of request_id %q cannot be read", ErrDamaged, key)
	}
	if s.now().Sub(r.Created) > RequestKeep {
		return Request{}, false, nil
	}
	return r, true, nil
}

// SaveRequest writes r durably (fsynced, atomically replaced) and prunes
// records older than RequestKeep.
func (s *Store) SaveRequest(r Request) error {
	if err := os.MkdirAll(s.path(layout.Requests), 0o755); err != nil {
		return fmt.Errorf("record request_id: %w", err)
	}
	if r.Created.IsZero() {
		r.Created = s.now()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(s.requestPath(r.Key), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("record request_id %q: %w", r.Key, err)
	}
	s.pruneRequests()
	return nil
}

// pruneRequests removes expired records and leftover temporary files.
func (s *Store) pruneRequests() {
	dir := s.path(layout.Requests)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	cut := s.now().Add(-RequestKeep)
	for _, de := range ents {
		info, err := de.Info()
		if err != nil {
			continue
		}
		stale := isTemp(de.Name()) && s.now().Sub(info.ModTime()) > time.Hour
		if stale || (strings.HasSuffix(de.Name(), ".json") && info.ModTime().Before(cut)) {
			_ = os.Remove(s.path(layout.Requests, de.Name()))
		}
	}
}

// FindChainRoot returns the id and file of the root message (seq 0) of
// chain wherever it is (inbox, done, dead), or ok false.
func (s *Store) FindChainRoot(chain string) (id, file string, ok bool) {
	views, err := s.Messages()
	if err != nil {
		return "", "", false
	}
	for _, v := range views {
		if v.Chain == chain && v.Seq == 0 && v.ID != "" {
			return v.ID, v.Name + layout.MessageExt, true
		}
	}
	if _, err := os.Stat(s.path(layout.Runs, chain+"-0")); err == nil {
		return chain + "-0", "", true
	}
	return "", "", false
}

// ReserveChain hands out a fresh chain id.
func (s *Store) ReserveChain() string {
	return s.chains.Next()
}
