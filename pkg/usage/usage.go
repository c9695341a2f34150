// Package usage is what AI calls cost: the usage file format routines
// write, parsers for what AI CLIs print in their JSON modes, a price table
// for tools that report tokens but no cost, and the sums the controller
// keeps per attempt and per message.
//
// # The usage file
//
// Every attempt gets DECREE_USAGE_FILE, a JSON-lines file in the run
// directory (usage.try-001.jsonl for attempt 1). A routine appends one line
// per AI call:
//
//	{"tool":"claude","model":"claude-sonnet-4-5","session_id":"…",
//	 "input_tokens":12,"output_tokens":800,"cache_read_tokens":30000,
//	 "cache_write_tokens":4000,"cost_usd":0.0412,"cost_source":"reported"}
//
// Every field is optional, but a line needs a cost or one token count.
// input_tokens counts input that was not read from a cache (Anthropic's
// sense); parsers of tools that count cached input inside the input
// (Codex, Gemini) subtract it. cost_source is "reported" (the tool said
// so) or "estimated" (computed from a price table); a line with tokens and
// no cost is priced by the controller from the price table (Prices).
// A malformed line is skipped and counted; it never fails an attempt or
// loses the other lines.
//
// # Counters
//
// Claude Code's total_cost_usd (and the usage next to it) is cumulative
// per process, and a process resumed with --resume has either restarted it
// or restored the saved total, depending on the CLI version. So lines
// marked cumulative (the Claude parser marks its lines, and a "claude"
// line with a session id counts as cumulative unless it says
// "cumulative":false) are never summed raw: the Sum keeps the last value
// per session and adds the increment; a value lower than the last one is
// a reset and counts whole. The Sum carries over from one attempt to the
// next, so a session resumed by a retry is not counted twice.
//
// Money is kept in whole micro-dollars (Dollars), so totals are exact.
package usage

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// Cost sources.
const (
	SourceReported  = "reported"
	SourceEstimated = "estimated"
)

// FileEnv is the environment variable naming an attempt's usage file.
const FileEnv = "DECREE_USAGE_FILE"

// FileName is the usage file of attempt n in the run directory:
// "usage.try-001.jsonl".
func FileName(n int) string { return fmt.Sprintf("usage.try-%03d.jsonl", n) }

// Dollars is an amount of US dollars in whole micro-dollars. In JSON it is
// a plain decimal number of dollars ("cost_usd": 0.0412).
type Dollars int64

// FromFloat rounds a dollar amount to micro-dollars.
func FromFloat(f float64) Dollars { return Dollars(math.Round(f * 1e6)) }

// Float is the amount in dollars.
func (d Dollars) Float() float64 { return float64(d) / 1e6 }

// String prints the amount with a dollar sign and four decimals
// ("$0.0042", "$12.3400"): a hundredth of a cent, the same width in
// every row of a table.
func (d Dollars) String() string {
	return "$" + strconv.FormatFloat(d.Float(), 'f', 4, 64)
}

// MarshalJSON writes the amount in dollars.
func (d Dollars) MarshalJSON() ([]byte, error) {
	return []byte(strconv.FormatFloat(d.Float(), 'f', -1, 64)), nil
}

// UnmarshalJSON reads an amount in dollars.
func (d *Dollars) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(b)), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("a dollar amount must be a number, got %s", b)
	}
	*d = FromFloat(f)
	return nil
}

// Record is one line of a usage file: one AI call.
type Record struct {
	Tool             string   `json:"tool,omitempty"`
	Model            string   `json:"model,omitempty"`
	SessionID        string   `json:"session_id,omitempty"`
	InputTokens      int64    `json:"input_tokens,omitempty"`
	OutputTokens     int64    `json:"output_tokens,omitempty"`
	CacheReadTokens  int64    `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64    `json:"cache_write_tokens,omitempty"`
	CostUSD          *Dollars `json:"cost_usd,omitempty"`
	CostSource       string   `json:"cost_source,omitempty"`
	// Cumulative marks a line whose counts are a per-process total
	// (Claude's); nil means: cumulative for a "claude" line with a
	// session id.
	Cumulative *bool `json:"cumulative,omitempty"`
}

// IsCumulative reports whether the line's counts are running totals of
// its session (see the package doc).
func (r Record) IsCumulative() bool {
	if r.SessionID == "" {
		return false
	}
	if r.Cumulative != nil {
		return *r.Cumulative
	}
	return strings.EqualFold(r.Tool, "claude")
}

func (r Record) hasTokens() bool {
	return r.InputTokens != 0 || r.OutputTokens != 0 || r.CacheReadTokens != 0 || r.CacheWriteTokens != 0
}

// Check reports what is wrong with a record, nil when it is usable.
func (r Record) Check() error {
	if r.CostUSD == nil && !r.hasTokens() {
		return errors.New("neither a cost nor a token count")
	}
	if r.InputTokens < 0 || r.OutputTokens < 0 || r.CacheReadTokens < 0 || r.CacheWriteTokens < 0 {
		return errors.New("a negative token count")
	}
	if r.CostUSD != nil && *r.CostUSD < 0 {
		return errors.New("a negative cost")
	}
	switch r.CostSource {
	case "", SourceReported, SourceEstimated:
	default:
		return fmt.Errorf("cost_source %q is neither %s nor %s", r.CostSource, SourceReported, SourceEstimated)
	}
	return nil
}

// ParseLine reads one usage line.
func ParseLine(line []byte) (Record, error) {
	var r Record
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&r); err != nil {
		return Record{}, fmt.Errorf("not a JSON object of usage fields: %w", err)
	}
	if dec.More() {
		return Record{}, errors.New("more than one JSON value on the line")
	}
	if err := r.Check(); err != nil {
		return Record{}, err
	}
	return r, nil
}

// maxLine is the longest usage line read; a longer one is malformed.
const maxLine = 1 << 20

// Read reads a usage file's lines. Malformed lines are skipped: their
// count and a warning per line (the first few) are returned; blank lines
// are ignored. Only a failing reader is an error.
func Read(rd io.Reader) (recs []Record, malformed int, warnings []string, err error) {
	br := bufio.NewReaderSize(rd, 64<<10)
	skip := func(n int, why error) {
		malformed++
		if len(warnings) < maxWarnings {
			warnings = append(warnings, fmt.Sprintf("usage line %d skipped: %v", n, why))
		}
	}
	for n := 1; ; n++ {
		line, long, rerr := readLine(br)
		switch t := bytes.TrimSpace(line); {
		case long:
			skip(n, fmt.Errorf("longer than %d bytes", maxLine))
		case len(t) > 0:
			if r, perr := ParseLine(t); perr != nil {
				skip(n, perr)
			} else {
				recs = append(recs, r)
			}
		}
		if rerr == io.EOF {
			return recs, malformed, warnings, nil
		}
		if rerr != nil {
			return recs, malformed, warnings, rerr
		}
	}
}

// maxWarnings caps the warnings Read returns (the count is exact).
const maxWarnings = 10

// readLine reads one line without its newline; long reports a line over
// maxLine (whose bytes are dropped).
func readLine(br *bufio.Reader) (line []byte, long bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !long {
			if len(line)+len(chunk) > maxLine {
				long, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), long, err
	}
}

// ReadFile reads a usage file; a missing file has no lines.
func ReadFile(path string) (recs []Record, malformed int, warnings []string, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil, nil
	}
	if err != nil {
		return nil, 0, nil, fmt.Errorf("read usage file: %w", err)
	}
	defer f.Close()
	return Read(f)
}

// Append adds records to a usage file (created when missing), one line
// each, in one write so that concurrent writers do not interleave lines.
func Append(path string, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	var buf bytes.Buffer
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("encode usage line: %w", err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open usage file %s: %w", path, err)
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("append to usage file %s: %w", path, err)
	}
	return f.Close()
}
