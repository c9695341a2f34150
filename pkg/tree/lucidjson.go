package tree

import (
	"bytes"
	"encoding/json"
	"strings"
)

type lucidDoc struct {
	Title string `json:"title"`
	Pages []struct {
		Items struct {
			Shapes []lucidShape `json:"shapes"`
			Lines  []lucidLine  `json:"lines"`
		} `json:"items"`
	} `json:"pages"`
}

type lucidText struct {
	Label string `json:"label"`
	Text  string `json:"text"`
}

type lucidKV struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

type lucidShape struct {
	ID         string      `json:"id"`
	Class      string      `json:"class"`
	TextAreas  []lucidText `json:"textAreas"`
	CustomData []lucidKV   `json:"customData"`
}

type lucidLine struct {
	ID        string      `json:"id"`
	Endpoint1 lucidEnd    `json:"endpoint1"`
	Endpoint2 lucidEnd    `json:"endpoint2"`
	TextAreas []lucidText `json:"textAreas"`
}

type lucidEnd struct {
	ConnectedTo string `json:"connectedTo"`
}

// ParseJSON reads Lucid REST API document contents (GET
// /documents/{id}/contents): shapes and lines of every page.
func ParseJSON(name string, data []byte) (*Document, error) {
	ps := &problems{file: name}
	var raw lucidDoc
	if err := json.Unmarshal(bytes.TrimPrefix(data, []byte("\ufeff")), &raw); err != nil {
		ps.add("", "not Lucid document JSON: %v; save the response of GET /documents/{id}/contents, or use `decreectl tree fetch`", err)
		return nil, ps.err()
	}
	if raw.Pages == nil {
		ps.add("", "no \"pages\" in the JSON; this is not Lucid document contents (GET /documents/{id}/contents)")
		return nil, ps.err()
	}
	doc := &Document{File: name, Title: raw.Title, byID: map[string]*Node{}}
	seen := map[string]bool{}
	for _, pg := range raw.Pages {
		for _, s := range pg.Items.Shapes {
			where := "shape " + s.ID
			if s.ID == "" || seen[s.ID] {
				ps.add(where, "a shape without an id, or with an id used twice; ids must be unique")
				continue
			}
			seen[s.ID] = true
			n := &Node{ID: s.ID, Where: where, Shape: className(s.Class), Text: mainText(s.TextAreas), Metadata: map[string]string{}}
			for _, kv := range s.CustomData {
				v := strings.TrimSpace(scalar(kv.Value))
				switch {
				case v == "":
				case strings.EqualFold(kv.Key, "tags"):
					n.Tags = append(n.Tags, splitTags(v)...)
				default:
					n.Metadata[kv.Key] = v
				}
			}
			doc.Nodes = append(doc.Nodes, n)
			doc.byID[s.ID] = n
		}
		for _, l := range pg.Items.Lines {
			if l.ID != "" && seen[l.ID] {
				ps.add("line "+l.ID, "the id is used twice; ids must be unique")
				continue
			}
			seen[l.ID] = true
			doc.Lines = append(doc.Lines, &Line{ID: l.ID, Where: "line " + l.ID, From: l.Endpoint1.ConnectedTo, To: l.Endpoint2.ConnectedTo, Label: mainText(l.TextAreas)})
		}
	}
	link(doc, ps)
	doc.problems = ps.list
	return doc, nil
}

// className turns a Lucid class ("ProcessBlock", "PredefinedProcessBlock",
// "TerminatorBlock") into the shape name the CSV export uses.
func className(c string) string {
	c = strings.TrimSuffix(c, "Block")
	var b strings.Builder
	for i, r := range c {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte(' ')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// mainText is the text area labelled Text, else the first non-empty one.
func mainText(tas []lucidText) string {
	for _, ta := range tas {
		if ta.Label == "Text" && strings.TrimSpace(ta.Text) != "" {
			return strings.TrimSpace(ta.Text)
		}
	}
	for _, ta := range tas {
		if t := strings.TrimSpace(ta.Text); t != "" {
			return t
		}
	}
	return ""
}

func scalar(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}
