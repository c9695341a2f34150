package wiremanifest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"sort"

	"github.com/decreehq/decree/pkg/checkpoint"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// DigestBuckets is the number of buckets the digest groups entries in.
const DigestBuckets = 1024

// digestPrefix names the digest's definition; it is hashed first, so a
// digest of another definition never matches.
const digestPrefix = "decree manifest digest 2\n"

// The manifest digest is defined as
//
//	SHA-256(digestPrefix || sum[0] || ... || sum[DigestBuckets-1])
//
// where sum[b] is the SHA-256 of the records of the entries whose path is
// in bucket b (BucketOf), in byte order of their paths, and a record is
// the path, the content hash, the size, the mode (644, 755 or 120000) and
// the link target, each variable field prefixed with its length (so no
// two manifests have the same records). A manifest that differs in any
// entry has a different bucket sum there, hence (SHA-256 being collision
// resistant) a different digest; and a tree changed in k paths needs only
// those k buckets rehashed plus the 32 KiB of bucket sums.

// BucketOf returns the digest bucket of path: FNV-1a (64-bit) of its
// bytes, modulo DigestBuckets.
func BucketOf(path string) int {
	h := uint64(14695981039346656037)
	for i := 0; i < len(path); i++ {
		h ^= uint64(path[i])
		h *= 1099511628211
	}
	return int(h % DigestBuckets)
}

// BucketSums holds the sum of every bucket.
type BucketSums [DigestBuckets][32]byte

// Digest combines bucket sums into the manifest digest (hex).
func (s *BucketSums) Digest() string {
	h := sha256.New()
	h.Write([]byte(digestPrefix))
	for i := range s {
		h.Write(s[i][:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// BucketSum is the sum of one bucket's entries, which must all be of that
// bucket and sorted by path.
func BucketSum(entries []*decreev1.FileEntry) [32]byte {
	var b []byte
	for _, fe := range entries {
		b = appendRecord(b, fe.GetPath(), fe.GetSha256(), fe.GetSize(), canonicalMode(fe.GetMode()), fe.GetLinkTarget())
	}
	return sha256.Sum256(b)
}

// Digest is the manifest digest of m (see the definition above).
func Digest(m *checkpoint.Manifest) (string, error) {
	var buckets [DigestBuckets][]string
	for p := range m.Files {
		b := BucketOf(p)
		buckets[b] = append(buckets[b], p)
	}
	var sums BucketSums
	var rec []byte
	for i, paths := range buckets {
		sort.Strings(paths)
		rec = rec[:0]
		for _, p := range paths {
			e := m.Files[p]
			rec = appendRecord(rec, p, e.SHA256, e.Size, wireMode(e.Mode), e.Link)
		}
		sums[i] = sha256.Sum256(rec)
	}
	return sums.Digest(), nil
}

// DigestEntries is the manifest digest of entries as they arrive over the
// wire: in digest order (by bucket, then path, as a controller sends them)
// they are hashed as they come; in any other order they are grouped and
// sorted first. Duplicate paths are not detected here (FromProto refuses
// them).
func DigestEntries(entries []*decreev1.FileEntry) string {
	var sums BucketSums
	empty := sha256.Sum256(nil)
	for i := range sums {
		sums[i] = empty
	}
	inOrder := true
	for i := 1; i < len(entries); i++ {
		a, b := entries[i-1].GetPath(), entries[i].GetPath()
		if ba, bb := BucketOf(a), BucketOf(b); ba > bb || ba == bb && a >= b {
			inOrder = false
			break
		}
	}
	if !inOrder {
		sorted := append([]*decreev1.FileEntry(nil), entries...)
		sort.Slice(sorted, func(i, j int) bool {
			a, b := sorted[i].GetPath(), sorted[j].GetPath()
			if ba, bb := BucketOf(a), BucketOf(b); ba != bb {
				return ba < bb
			}
			return a < b
		})
		entries = sorted
	}
	for start := 0; start < len(entries); {
		b := BucketOf(entries[start].GetPath())
		end := start + 1
		for end < len(entries) && BucketOf(entries[end].GetPath()) == b {
			end++
		}
		sums[b] = BucketSum(entries[start:end])
		start = end
	}
	return sums.Digest()
}

func appendRecord(b []byte, path, sum string, size int64, mode uint32, link string) []byte {
	b = binary.AppendUvarint(b, uint64(len(path)))
	b = append(b, path...)
	b = binary.AppendUvarint(b, uint64(len(sum)))
	b = append(b, sum...)
	b = binary.AppendVarint(b, size)
	b = binary.AppendUvarint(b, uint64(mode))
	b = binary.AppendUvarint(b, uint64(len(link)))
	return append(b, link...)
}

// wireMode is the wire mode of a manifest mode, as EntryToProto sends it.
func wireMode(m checkpoint.Mode) uint32 {
	switch m {
	case checkpoint.ModeExec:
		return WireExec
	case checkpoint.ModeSymlink:
		return WireSymlink
	}
	return WireFile
}

// canonicalMode maps git's spellings of the wire modes to the wire's.
func canonicalMode(m uint32) uint32 {
	switch m {
	case 0o100644:
		return WireFile
	case 0o100755:
		return WireExec
	}
	return m
}
