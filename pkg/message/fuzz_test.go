package message

import (
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics and that every message it accepts
// survives Render and Parse unchanged. Seeds live in testdata/fuzz/FuzzParse
// and testdata/messages.
func FuzzParse(f *testing.F) {
	addMessageSeeds(f)
	f.Add([]byte("---\na: 1\n---\nbody"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("error is %T, want *ParseError: %v", err, err)
			}
			return
		}
		out := m.Render()
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("rendered message does not parse: %v\ninput: %q\nrendered: %q", err, data, out)
		}
		if !back.Equal(m) {
			t.Fatalf("round trip changed the message\ninput: %q\nrendered: %q\nbefore: %#v\nafter: %#v", data, out, m.Fields, back.Fields)
		}
		// Rendering is stable: a second round gives the same bytes.
		if again := back.Render(); string(again) != string(out) {
			t.Fatalf("render not stable:\n%q\n%q", out, again)
		}
		_ = m.GetString("chain")
		for _, fl := range m.Fields {
			_ = ParamValue(fl.Value)
		}
	})
}

// TestRoundTripGenerated renders many generated messages and reads them
// back.
func TestRoundTripGenerated(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for i := 0; i < 3000; i++ {
		m := &Message{HasFrontmatter: rng.Intn(4) != 0}
		n := rng.Intn(6)
		used := map[string]bool{}
		for j := 0; j < n; j++ {
			k := genString(rng)
			if used[k] {
				continue
			}
			used[k] = true
			m.Fields = append(m.Fields, Field{Key: k, Value: genValue(rng, 0)})
		}
		if len(m.Fields) > 0 {
			m.HasFrontmatter = true
		}
		m.Body = []byte(genBody(rng))
		if !m.HasFrontmatter {
			// A body that would read as frontmatter forces a block; that
			// case is covered by TestRender.
			if _, ok := delimiterLine([]byte(strings.TrimPrefix(string(m.Body), "\xEF\xBB\xBF"))); ok {
				continue
			}
		}
		assertRoundTrip(t, m)
	}
}

var alphabet = []string{"a", "Z", "0", "9", " ", "\t", "\n", "\r\n", ":", "#", "-", "---", "'", "\"", "\\", "{", "}", "[", "]", ",", "&", "*", "!", "|", ">", "%", "@", "`", "é", "日", "🚀", "\x00", "\x1b", "\xff", "\u2028", "\ufeff", "~", "null", "true", "0x1F", "1e3", ".inf", "2025-01-01", "<<", "?"}

func genString(rng *rand.Rand) string {
	var b strings.Builder
	for n := rng.Intn(8); n > 0; n-- {
		b.WriteString(alphabet[rng.Intn(len(alphabet))])
	}
	return b.String()
}

func genBody(rng *rand.Rand) string {
	var b strings.Builder
	for n := rng.Intn(5); n > 0; n-- {
		if rng.Intn(3) == 0 {
			b.WriteString("---\n")
		}
		b.WriteString(genString(rng))
		b.WriteString("\n")
	}
	return b.String()
}

func genValue(rng *rand.Rand, depth int) any {
	max := 9
	if depth > 2 {
		max = 7
	}
	switch rng.Intn(max) {
	case 0:
		return nil
	case 1:
		return rng.Intn(2) == 0
	case 2:
		return rng.Intn(2000) - 1000
	case 3:
		return []float64{0.5, -1.0, 1e21, 3.0, math.Inf(1), math.NaN(), 1e-9, 123456.789}[rng.Intn(8)]
	case 4:
		return uint64(math.MaxInt64) + uint64(rng.Intn(1000)) + 1
	case 5, 6:
		return genString(rng)
	case 7:
		l := make([]any, rng.Intn(4))
		for i := range l {
			l[i] = genValue(rng, depth+1)
		}
		return l
	default:
		m := map[string]any{}
		for n := rng.Intn(4); n > 0; n-- {
			m[genString(rng)] = genValue(rng, depth+1)
		}
		return m
	}
}

// addMessageSeeds adds every message of testdata/messages to f's corpus.
func addMessageSeeds(f *testing.F) {
	f.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "messages", "*.md"))
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}
