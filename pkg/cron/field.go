package cron

import (
	"fmt"
	"strconv"
	"strings"
)

// fieldSpec describes one of the five fields.
type fieldSpec struct {
	name     string
	min, max int
	names    []string // names[i] stands for min+i
	day      bool     // a day field, where "?" means "*"
}

var fieldSpecs = [5]fieldSpec{
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day-of-month", min: 1, max: 31, day: true},
	{name: "month", min: 1, max: 12, names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
	{name: "day-of-week", min: 0, max: 7, names: []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}, day: true},
}

// parse turns one field into a bit set of matching values.
func (f fieldSpec) parse(field string) (uint64, error) {
	var bits uint64
	for _, part := range strings.Split(field, ",") {
		b, err := f.parsePart(part)
		if err != nil {
			return 0, fmt.Errorf("%s field %q: %w", f.name, field, err)
		}
		bits |= b
	}
	return bits, nil
}

func (f fieldSpec) parsePart(part string) (uint64, error) {
	rng, stepText, hasStep := strings.Cut(part, "/")
	step := 1
	if hasStep {
		n, err := strconv.Atoi(stepText)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("step %q must be a positive number", stepText)
		}
		step = n
	}
	lo, hi := f.min, f.max
	switch {
	case rng == "*" || (rng == "?" && f.day):
		if f.name == "day-of-week" {
			hi = 6 // "*" lists each day once; 7 is an alias of 0
		}
	case rng == "":
		return 0, fmt.Errorf("empty value; write a number, a range a-b or *")
	default:
		a, b, isRange := strings.Cut(rng, "-")
		var err error
		if lo, err = f.value(a); err != nil {
			return 0, err
		}
		switch {
		case isRange:
			if hi, err = f.value(b); err != nil {
				return 0, err
			}
			if hi < lo {
				return 0, fmt.Errorf("range %s runs backwards; write the smaller value first", rng)
			}
		case !hasStep:
			hi = lo
		}
	}
	var bits uint64
	for v := lo; v <= hi; v += step {
		bits |= 1 << uint(v)
	}
	return bits, nil
}

// value reads a number or a name within the field's bounds.
func (f fieldSpec) value(s string) (int, error) {
	for i, n := range f.names {
		if strings.EqualFold(s, n) {
			return f.min + i, nil
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		if len(f.names) > 0 {
			return 0, fmt.Errorf("%q is neither a number from %d to %d nor a name (%s)", s, f.min, f.max, strings.Join(f.names, ", "))
		}
		return 0, fmt.Errorf("%q is not a number from %d to %d", s, f.min, f.max)
	}
	if v < f.min || v > f.max {
		return 0, fmt.Errorf("%d is out of range; use %d to %d", v, f.min, f.max)
	}
	return v, nil
}
