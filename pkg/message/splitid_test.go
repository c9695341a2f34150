package message

import (
	"fmt"
	"math/rand"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// idPattern is the language SplitID accepts, kept here as its oracle.
var idPattern = regexp.MustCompile(`^([0-9]{16})-([0-9]{1,9})$`)

func splitIDByPattern(id string) (string, int, bool) {
	m := idPattern.FindStringSubmatch(id)
	if m == nil || !ValidChain(m[1]) {
		return "", 0, false
	}
	n, err := strconv.Atoi(m[2])
	if err != nil {
		return "", 0, false
	}
	return m[1], n, true
}

func TestSplitIDMatchesPattern(t *testing.T) {
	cases := []string{
		"", "-", "2026112601020300-1", "2026112601020300-0", "2026112601020300-123456789",
		"2026112601020300-1234567890", "2026112601020300-", "2026112601020300", "2026112601020300-1a",
		"0026112601020300-1", "2026132601020300-1", "2026112601020300--1", "2026112601020300-+1",
		"202611260102030-1", "20261126010203001-1", "2026112601020300-01", "x2026112601020300-1",
		"2026112601020300-1\n", "２026112601020300-1",
	}
	r := rand.New(rand.NewSource(1))
	const alphabet = "0123456789-x\n"
	for i := 0; i < 20000; i++ {
		b := []byte("2026112601020300-" + strconv.Itoa(r.Intn(1e6)))
		for k := r.Intn(3); k > 0; k-- {
			j := r.Intn(len(b) + 1)
			switch r.Intn(3) {
			case 0:
				if j < len(b) {
					b[j] = alphabet[r.Intn(len(alphabet))]
				}
			case 1:
				b = append(b[:j], append([]byte{alphabet[r.Intn(len(alphabet))]}, b[j:]...)...)
			default:
				if j < len(b) {
					b = append(b[:j], b[j+1:]...)
				}
			}
		}
		cases = append(cases, string(b))
	}
	for _, id := range cases {
		c1, s1, ok1 := SplitID(id)
		c2, s2, ok2 := splitIDByPattern(id)
		if c1 != c2 || s1 != s2 || ok1 != ok2 {
			t.Fatalf("SplitID(%q) = %q, %d, %v; the pattern says %q, %d, %v", id, c1, s1, ok1, c2, s2, ok2)
		}
	}
}

// splitChain agrees with time.Parse on which 14-digit times are real.
func TestSplitChainMatchesTimeParse(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	cases := []string{"20240229000000", "20230229000000", "21000229000000", "20000229000000", "20261131235959",
		"20261130235959", "20261301000000", "20260001000000", "20260100000000", "20261231240000", "20261231236000",
		"20261231235960", "10000101000000", "99991231235959"}
	for i := 0; i < 50000; i++ {
		y := 1000 + r.Intn(9000)
		cases = append(cases, fmt.Sprintf("%04d%02d%02d%02d%02d%02d", y, r.Intn(14), r.Intn(33), r.Intn(26), r.Intn(62), r.Intn(62)))
	}
	for _, c := range cases {
		want, err := time.ParseInLocation(chainTimeLayout, c, time.UTC)
		got, n, ok := splitChain(c + "07")
		if ok != (err == nil) || (ok && (!got.Equal(want) || n != 7)) {
			t.Fatalf("splitChain(%q) = %v, %v; time.Parse says %v, %v", c+"07", got, ok, want, err)
		}
	}
}
