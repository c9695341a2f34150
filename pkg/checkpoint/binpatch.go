package checkpoint

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"strconv"
)

const base85Alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"

// writeLiteral writes one "literal <size>" hunk of a GIT binary patch: the
// zlib-deflated data in base85 lines of at most 52 bytes, each prefixed with
// its length ('A'..'Z' = 1..26, 'a'..'z' = 27..52), then an empty line.
func writeLiteral(w *bytes.Buffer, data []byte) {
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.DefaultCompression)
	zw.Write(data)
	zw.Close()
	w.WriteString("literal ")
	w.WriteString(strconv.Itoa(len(data)))
	w.WriteByte('\n')
	deflated := z.Bytes()
	for len(deflated) > 0 {
		n := min(len(deflated), 52)
		if n <= 26 {
			w.WriteByte(byte('A' + n - 1))
		} else {
			w.WriteByte(byte('a' + n - 27))
		}
		encode85(w, deflated[:n])
		w.WriteByte('\n')
		deflated = deflated[n:]
	}
	w.WriteByte('\n')
}

// encode85 is git's encode_85: big-endian groups of 4 bytes (the last one
// zero-padded) as 5 base85 digits.
func encode85(w *bytes.Buffer, data []byte) {
	var out [5]byte
	for len(data) > 0 {
		var acc uint32
		for shift := 24; shift >= 0; shift -= 8 {
			acc |= uint32(data[0]) << shift
			data = data[1:]
			if len(data) == 0 {
				break
			}
		}
		for i := 4; i >= 0; i-- {
			out[i] = base85Alphabet[acc%85]
			acc /= 85
		}
		w.Write(out[:])
	}
}

// gitBlobID is git's object id of a blob with this content (SHA-1 of
// "blob <size>\0" + content), written on "index" lines so that git apply can
// check binary patches.
func gitBlobID(data []byte) string {
	h := sha1.New()
	h.Write([]byte("blob " + strconv.Itoa(len(data)) + "\x00"))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

const nullBlobID = "0000000000000000000000000000000000000000"

// isBinary is git's rule: a NUL byte in the first 8000 bytes.
func isBinary(data []byte) bool {
	if len(data) > 8000 {
		data = data[:8000]
	}
	return bytes.IndexByte(data, 0) >= 0
}
