package tree

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Lucid's own CSV columns; any other column is node metadata.
var lucidColumns = map[string]bool{
	"Id": true, "Name": true, "Shape Library": true, "Page ID": true, "Contained By": true,
	"Group": true, "Line Source": true, "Line Destination": true, "Source Arrow": true,
	"Destination Arrow": true, "Tags": true, "Status": true, "Comments": true,
}

// requiredColumns must be present in a CSV export.
var requiredColumns = []string{"Id", "Name", "Line Source", "Line Destination", "Text Area 1"}

// ParseCSV reads a Lucid CSV export (see the package documentation).
func ParseCSV(name string, data []byte) (*Document, error) {
	ps := &problems{file: name}
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	header, err := r.Read()
	if errors.Is(err, io.EOF) {
		ps.add("", "the file is empty; export the chart from Lucid as CSV (File > Export > CSV of shape data)")
		return nil, ps.err()
	}
	if err != nil {
		ps.add("", "not a readable CSV file: %v", err)
		return nil, ps.err()
	}
	col := map[string]int{}
	for i, h := range header {
		h = strings.TrimSpace(h)
		if _, dup := col[h]; !dup && h != "" {
			col[h] = i
		}
	}
	var missing []string
	for _, c := range requiredColumns {
		if _, ok := col[c]; !ok {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		ps.add("", "missing column(s) %s; the header is %q. Export the chart from Lucid as CSV with shape data",
			strings.Join(missing, ", "), strings.Join(header, ","))
		return nil, ps.err()
	}
	doc := &Document{File: name, byID: map[string]*Node{}}
	seen := map[string]string{}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			ps.add("", "not a readable CSV file: %v", err)
			return nil, ps.err()
		}
		line, _ := r.FieldPos(0)
		cell := func(c string) string {
			i, ok := col[c]
			if !ok || i >= len(rec) {
				return ""
			}
			return strings.TrimSpace(rec[i])
		}
		where := fmt.Sprintf("row %d", line)
		id, kind := cell("Id"), cell("Name")
		if id == "" && kind == "" {
			continue // a blank row
		}
		if id == "" {
			ps.add(where, "the Id cell is empty; every Lucid row has an id")
			continue
		}
		if prev, dup := seen[id]; dup {
			ps.add(where, "id %s is used again (first at %s); ids must be unique", id, prev)
			continue
		}
		seen[id] = where
		switch kind {
		case "Document":
			doc.Title = cell("Text Area 1")
		case "Page":
		case "Line":
			label := cell("Tags")
			if label == "" {
				label = cell("Text Area 1")
			}
			doc.Lines = append(doc.Lines, &Line{ID: id, Where: where, From: cell("Line Source"), To: cell("Line Destination"), Label: label})
		default:
			n := &Node{ID: id, Where: where, Shape: kind, Text: cell("Text Area 1"), Tags: splitTags(cell("Tags")), Metadata: map[string]string{}}
			for h, i := range col {
				if lucidColumns[h] || strings.HasPrefix(h, "Text Area ") || i >= len(rec) {
					continue
				}
				if v := strings.TrimSpace(rec[i]); v != "" {
					n.Metadata[h] = v
				}
			}
			doc.Nodes = append(doc.Nodes, n)
			doc.byID[id] = n
		}
	}
	link(doc, ps)
	doc.problems = ps.list
	return doc, nil
}

// splitTags splits a Tags cell on commas, trimming each tag.
func splitTags(s string) []string {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// link resolves every line's ends, recording lines to unknown ids and
// dangling lines as problems.
func link(doc *Document, ps *problems) {
	for _, l := range doc.Lines {
		ok := true
		for _, end := range []struct {
			name string
			id   string
			dst  **Node
		}{{"source", l.From, &l.Src}, {"destination", l.To, &l.Dst}} {
			switch n := doc.byID[end.id]; {
			case end.id == "":
				ps.add(lineLabel(l), "the line has no %s (it dangles); connect it to a shape or delete it", end.name)
				ok = false
			case n == nil:
				ps.add(lineLabel(l), "the line's %s %s is not a shape of this chart; reconnect the line", end.name, end.id)
				ok = false
			default:
				*end.dst = n
			}
		}
		if ok {
			l.Src.Out = append(l.Src.Out, l)
			l.Dst.In = append(l.Dst.In, l)
		}
	}
}
