package replica

import (
	"context"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/wiremanifest"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// Synced says what Sync did.
type Synced struct {
	// Manifest is the controller's manifest, which the replica now matches.
	Manifest *checkpoint.Manifest
	// Digest is its digest.
	Digest string
	// FetchedBlobs and FetchedBytes count contents that came over the
	// network.
	FetchedBlobs int
	FetchedBytes int64
	// CopiedLocal counts files written from content already in the replica.
	CopiedLocal int
	// Written counts paths created or replaced (files and links), Chmod
	// mode-only changes, Deleted paths removed.
	Written, Chmod, Deleted int
}

// dest is a regular file to write.
type dest struct {
	rel string
	e   checkpoint.Entry
}

// addContext adds to local the replica's copies of the read-only context
// files under .decree/ that target lists (Scan never looks there), so
// that unchanged ones do not travel again.
func (r *Replica) addContext(local, target *checkpoint.Manifest) {
	for p := range target.Files {
		if !wiremanifest.IsContextPath(p) {
			continue
		}
		abs := filepath.Join(r.root, filepath.FromSlash(p))
		fi, err := os.Lstat(abs)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		sum, size, err := hashFile(abs)
		if err != nil {
			continue
		}
		local.Files[p] = checkpoint.Entry{SHA256: hex.EncodeToString(sum[:]), Size: size, Mode: checkpoint.ModeOf(fi.Mode())}
	}
}

// written is a file Sync wrote, for the stat cache.
type written struct {
	rel string
	sum [32]byte
	key statKey
}

// Sync brings the replica to the controller's manifest for the lease
// token. want is the digest the assignment names (checked when not
// empty).
func (r *Replica) Sync(ctx context.Context, c Client, token, want string) (*Synced, error) {
	// The local scan and the controller's manifest are independent: get
	// both at once.
	var local *checkpoint.Manifest
	var scanErr error
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		local, scanErr = r.Scan(ctx)
	}()
	target, digest, err := r.controllerManifest(ctx, c, token, want)
	<-scanned
	if err != nil {
		return nil, err
	}
	if scanErr != nil {
		return nil, scanErr
	}
	r.addContext(local, target)
	st, err := r.apply(ctx, c, token, local, target)
	if err != nil {
		return nil, err
	}
	st.Digest = digest
	return st, nil
}

// controllerManifest fetches and checks the manifest for the lease: it
// must be the one the assignment names (want, when set), hash to its
// digest, and pass wiremanifest's checks.
func (r *Replica) controllerManifest(ctx context.Context, c Client, token, want string) (*checkpoint.Manifest, string, error) {
	resp, err := c.GetWorkspaceManifest(ctx, &decreev1.GetWorkspaceManifestRequest{LeaseToken: token})
	if err != nil {
		return nil, "", fmt.Errorf("replica sync: get the controller's manifest: %w", err)
	}
	if want != "" && resp.GetDigest() != want {
		return nil, "", fmt.Errorf("%w: the assignment names %s, the controller sent %s", ErrDigestMismatch, want, resp.GetDigest())
	}
	target, err := wiremanifest.FromProtoWithContext(resp.GetFiles(), 0)
	if err != nil {
		return nil, "", fmt.Errorf("replica sync: the controller's manifest was refused: %w", err)
	}
	if d := wiremanifest.DigestEntries(resp.GetFiles()); d != resp.GetDigest() {
		return nil, "", fmt.Errorf("%w: the manifest received hashes to %s, not to its digest %s (are the controller and this worker of different decree versions? the digest changed in this one)", ErrDigestMismatch, d, resp.GetDigest())
	}
	return target, resp.GetDigest(), nil
}

// apply changes the replica from local to target.
func (r *Replica) apply(ctx context.Context, c Client, token string, local, target *checkpoint.Manifest) (*Synced, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := &Synced{Manifest: target}
	changes := checkpoint.Compare(local, target)
	if len(changes) == 0 {
		return st, nil
	}
	need := map[string][]dest{}
	var deletes, links, chmods []checkpoint.Change
	for _, ch := range changes {
		b, a := ch.Before, ch.After
		switch {
		case a == nil:
			deletes = append(deletes, ch)
		case a.Mode == checkpoint.ModeSymlink:
			if b != nil {
				deletes = append(deletes, ch)
			}
			links = append(links, ch)
		case b != nil && b.Mode != checkpoint.ModeSymlink && b.SHA256 == a.SHA256:
			chmods = append(chmods, ch)
		default:
			if b != nil && b.Mode == checkpoint.ModeSymlink {
				deletes = append(deletes, ch)
			}
			need[a.SHA256] = append(need[a.SHA256], dest{rel: ch.Path, e: *a})
		}
	}
	// Contents the replica already has somewhere are staged by hard link
	// before anything is deleted or overwritten.
	staged := map[string]string{}
	defer func() {
		for _, p := range staged {
			os.Remove(p)
		}
	}()
	for p, e := range local.Files {
		if e.Mode == checkpoint.ModeSymlink || e.Size == 0 || need[e.SHA256] == nil || staged[e.SHA256] != "" {
			continue
		}
		tmp := filepath.Join(r.dir, "tmp", "stage-"+e.SHA256)
		os.Remove(tmp)
		if err := os.Link(filepath.Join(r.root, filepath.FromSlash(p)), tmp); err == nil {
			staged[e.SHA256] = tmp
		}
	}
	sort.Slice(deletes, func(i, j int) bool { return deletes[i].Path > deletes[j].Path })
	for _, ch := range deletes {
		if err := r.remove(ch.Path); err != nil {
			return nil, err
		}
		if ch.After == nil {
			st.Deleted++
			delete(r.cache.Entries, ch.Path)
		}
	}
	w := &writer{r: r, dirs: map[string]bool{}}
	var fetch []string
	for sum, ds := range need {
		if p := staged[sum]; p != "" {
			for _, d := range ds {
				if err := w.copyFile(p, d); err != nil {
					return nil, err
				}
				st.CopiedLocal++
			}
			continue
		}
		fetch = append(fetch, sum)
	}
	if err := w.fetch(ctx, c, token, fetch, need, st); err != nil {
		return nil, err
	}
	for _, ch := range chmods {
		abs, err := r.confined(ch.Path)
		if err != nil {
			return nil, err
		}
		fi, err := os.Lstat(abs)
		if err != nil || !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("replica sync: change the mode of %s: %v", ch.Path, err)
		}
		if err := os.Chmod(abs, modePerm(fi.Mode().Perm(), ch.After.Mode)); err != nil {
			return nil, fmt.Errorf("replica sync: %w", err)
		}
		st.Chmod++
	}
	for _, ch := range links {
		if err := wiremanifest.CheckLink(ch.Path, ch.After.Link); err != nil {
			return nil, fmt.Errorf("replica sync: %w", err)
		}
		if err := w.ensureParent(ch.Path); err != nil {
			return nil, err
		}
		abs, _ := r.confined(ch.Path)
		if err := writeSymlink(abs, ch.After.Link); err != nil {
			return nil, fmt.Errorf("replica sync: %w", err)
		}
		st.Written++
		delete(r.cache.Entries, ch.Path)
	}
	st.Written += len(w.done)
	r.record(w.done)
	return st, nil
}

// record puts the files just written into the stat cache (those older
// than a fresh stamp; the others are simply hashed at the next scan). The
// cache file is rewritten now only when many files were written (an
// initial sync); after a few, the next Scan (the one after the routine,
// which rewrites it anyway when the routine changed files) saves it: a
// crash before that costs hashing those few files again.
func (r *Replica) record(ws []written) {
	r.cacheDirty = true
	stamp, err := r.stamp()
	if err != nil {
		return
	}
	for _, x := range ws {
		if x.key.olderThan(stamp) {
			r.cache.Entries[x.rel] = cacheEntry{Key: x.key, Sum: hex.EncodeToString(x.sum[:])}
		} else {
			delete(r.cache.Entries, x.rel)
		}
	}
	if len(ws) <= 64+len(r.cache.Entries)/16 {
		return
	}
	if err := r.saveCache(); err != nil {
		r.log.Warn("replica stat cache not saved", "err", err)
		return
	}
	r.cacheDirty = false
}

// remove deletes a tracked file or symlink and then its parent
// directories while they are empty (ignored files keep theirs).
func (r *Replica) remove(rel string) error {
	abs, err := r.confined(rel)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(abs)
	if err != nil {
		return nil // already gone (or a parent is): nothing to delete
	}
	if fi.IsDir() {
		return fmt.Errorf("replica sync: delete %s: it is a directory in the replica; remove it by hand", rel)
	}
	if err := os.Remove(abs); err != nil {
		return fmt.Errorf("replica sync: delete %s: %w", rel, err)
	}
	for dir := filepath.Dir(abs); dir != r.root && strings.HasPrefix(dir, r.root+string(filepath.Separator)); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break
		}
	}
	return nil
}

// writer writes files into the replica, creating parent directories and
// refusing to go through symlinks or files. It is safe for concurrent use.
type writer struct {
	r    *Replica
	mu   sync.Mutex
	dirs map[string]bool // directories verified or created
	done []written
}

func (w *writer) wrote(x written) {
	w.mu.Lock()
	w.done = append(w.done, x)
	w.mu.Unlock()
}

// ensureParent makes sure every ancestor of rel is a real directory.
func (w *writer) ensureParent(rel string) error {
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		dir := strings.Join(parts[:i], "/")
		w.mu.Lock()
		ok := w.dirs[dir]
		w.mu.Unlock()
		if ok {
			continue
		}
		abs := filepath.Join(w.r.root, filepath.FromSlash(dir))
		fi, err := os.Lstat(abs)
		switch {
		case err != nil:
			if err := os.Mkdir(abs, 0o755); err != nil && !os.IsExist(err) {
				return fmt.Errorf("replica sync: create directory %s: %w", dir, err)
			}
			if fi, err = os.Lstat(abs); err != nil || !fi.IsDir() {
				return fmt.Errorf("replica sync: %s is not a directory after creating it", dir)
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("replica sync: cannot write %s: %s is a symlink in the replica, and nothing is written through one; remove it", rel, dir)
		case !fi.IsDir():
			return fmt.Errorf("replica sync: cannot write %s: %s is a file in the replica (an ignored one?); remove it", rel, dir)
		}
		w.mu.Lock()
		w.dirs[dir] = true
		w.mu.Unlock()
	}
	return nil
}

// prepare returns the absolute path of d, with its parents ready and any
// empty directory in its place removed.
func (w *writer) prepare(rel string) (string, error) {
	if err := w.ensureParent(rel); err != nil {
		return "", err
	}
	abs, err := w.r.confined(rel)
	if err != nil {
		return "", err
	}
	if fi, err := os.Lstat(abs); err == nil && fi.IsDir() {
		if err := os.Remove(abs); err != nil {
			return "", fmt.Errorf("replica sync: cannot write %s: a directory with files in it (ignored ones?) is in the way; remove it", rel)
		}
	}
	return abs, nil
}

func modePerm(perm fs.FileMode, m checkpoint.Mode) fs.FileMode {
	if m == checkpoint.ModeExec {
		return perm | (perm&0o444)>>2
	}
	return perm &^ 0o111
}

func writeSymlink(abs, target string) error {
	if fi, err := os.Lstat(abs); err == nil && fi.IsDir() {
		if err := os.Remove(abs); err != nil {
			return fmt.Errorf("create symlink %s: a directory with files in it is in the way", abs)
		}
	}
	return fsutil.ReplaceSymlink(abs, target)
}
