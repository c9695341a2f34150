package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Process is the answer of a process step.
type Process struct {
	Completed  bool     `json:"completed"`
	SecsTaken  float64  `json:"secs_taken"`
	TokensUsed float64  `json:"tokens_used"`
	Comments   []string `json:"comments"`
}

// Decision is the answer of a decision step.
type Decision struct {
	Choices []string `json:"choices"`
	Answer  string   `json:"answer"`
	Reasons []string `json:"reasons"`
}

// Validation is the answer of a validation call.
type Validation struct {
	FullyCompleted     bool     `json:"fully_completed"`
	PartiallyCompleted bool     `json:"partially_completed"`
	ShouldRetry        bool     `json:"should_retry"`
	Warnings           []string `json:"warnings"`
}

// searchTail bounds how much of a long output is searched for the answer
// object (answers come last; this keeps the search linear in practice).
const searchTail = 256 << 10

// FindObject returns the last JSON object in out that has the key need:
// the whole output, the inside of a ``` fence, or an object surrounded by
// other text all work.
func FindObject(out, need string) (map[string]any, bool) {
	s := out
	if len(s) > searchTail {
		s = s[len(s)-searchTail:]
	}
	var found map[string]any
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '{')
		if j < 0 {
			break
		}
		start := i + j
		dec := json.NewDecoder(strings.NewReader(s[start:]))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			i = start + 1
			continue
		}
		if _, ok := m[need]; ok {
			found = m
		}
		i = start + int(dec.InputOffset())
	}
	return found, found != nil
}

// ParseProcess reads a process answer (the key "completed" is required).
func ParseProcess(out string) (Process, error) {
	m, ok := FindObject(out, "completed")
	if !ok {
		return Process{}, errNoJSON("completed")
	}
	return Process{Completed: asBool(m["completed"]), SecsTaken: asFloat(m["secs_taken"]), TokensUsed: asFloat(m["tokens_used"]), Comments: asStrings(m["comments"])}, nil
}

// ParseDecision reads a decision answer (the key "answer" is required).
func ParseDecision(out string) (Decision, error) {
	m, ok := FindObject(out, "answer")
	if !ok {
		return Decision{}, errNoJSON("answer")
	}
	return Decision{Choices: asStrings(m["choices"]), Answer: asString(m["answer"]), Reasons: asStrings(m["reasons"])}, nil
}

// ParseValidation reads a validation answer (the key "fully_completed" is
// required).
func ParseValidation(out string) (Validation, error) {
	m, ok := FindObject(out, "fully_completed")
	if !ok {
		return Validation{}, errNoJSON("fully_completed")
	}
	return Validation{FullyCompleted: asBool(m["fully_completed"]), PartiallyCompleted: asBool(m["partially_completed"]),
		ShouldRetry: asBool(m["should_retry"]), Warnings: asStrings(m["warnings"])}, nil
}

func errNoJSON(key string) error {
	return fmt.Errorf("its output holds no JSON object with the key %q", key)
}

func asBool(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		b, _ := strconv.ParseBool(strings.TrimSpace(x))
		return b
	case json.Number:
		f, _ := x.Float64()
		return f != 0
	}
	return false
}

func asFloat(v any) float64 {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case string:
		f, _ := strconv.ParseFloat(strings.TrimSpace(x), 64)
		return f
	}
	return 0
}

func asString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	}
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(v)
	return strings.TrimSpace(b.String())
}

func asStrings(v any) []string {
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			out = append(out, asString(e))
		}
		return out
	}
	return []string{asString(v)}
}
