package tree

import (
	"fmt"
	"io"
	"strings"
)

// WriteText prints the tree as indented text, from the root: each step's
// kind, id, prompt, CLIs and limits, and under it its routes. A step
// reached a second time (from another parent) is named, not repeated.
func (t *Tree) WriteText(w io.Writer) error {
	title := t.Doc.Title
	if title == "" {
		title = "(untitled)"
	}
	lines := 0
	for _, s := range t.Steps {
		lines += len(s.Out)
	}
	pw := &errWriter{w: w}
	pw.printf("%s (%s): %d nodes, %d lines, starts at node %s\n", title, t.Doc.File, len(t.Steps), lines, t.Root.ID)
	shown := map[*Step]bool{}
	var walk func(s *Step, indent, prefix string)
	walk = func(s *Step, indent, prefix string) {
		pw.printf("%s%s%s\n", indent, prefix, s.describe())
		if shown[s] {
			return
		}
		shown[s] = true
		for _, r := range s.Routes {
			label := ""
			if s.Kind == KindDecision || r.Label != "" {
				label = r.Label + " -> "
			}
			if shown[r.To] {
				pw.printf("%s  %s(see node %s above)\n", indent, label, r.To.ID)
				continue
			}
			walk(r.To, indent+"  ", label)
		}
	}
	walk(t.Root, "", "")
	for _, p := range t.Warnings {
		pw.printf("warning: %s\n", p)
	}
	return pw.err
}

// describe is one line about a step.
func (s *Step) describe() string {
	head := fmt.Sprintf("%s %s %q", s.Kind, s.ID, Abbrev(s.Text, 60))
	if s.Kind == KindStart || s.Kind == KindEnd {
		return head
	}
	var attrs []string
	attrs = append(attrs, "cli "+s.CLI)
	if s.ValidatePrompt != "" {
		attrs = append(attrs, "validated by "+s.ValidateCLI, fmt.Sprintf("%d retries via %s", s.Retries, s.RetryCLI))
	} else {
		attrs = append(attrs, "not validated")
	}
	attrs = append(attrs, "timeout "+s.Timeout.String())
	if len(s.Tags) > 0 {
		attrs = append(attrs, "tags "+strings.Join(s.Tags, ","))
	}
	for _, k := range s.MetadataKeys() {
		attrs = append(attrs, fmt.Sprintf("%s=%s", k, Abbrev(s.Metadata[k], 30)))
	}
	if s.Kind == KindDecision {
		attrs = append(attrs, "routes "+strings.Join(quoteAll(s.Labels()), " | "))
	}
	return head + " [" + strings.Join(attrs, "; ") + "]"
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// WriteMermaid prints the tree as a Mermaid flowchart (top-down): stadium
// shapes for terminators, diamonds for decisions, boxes for the rest, and
// the route labels on the arrows.
func (t *Tree) WriteMermaid(w io.Writer) error {
	pw := &errWriter{w: w}
	if t.Doc.Title != "" {
		pw.printf("---\ntitle: %s\n---\n", mermaidText(t.Doc.Title))
	}
	pw.printf("flowchart TD\n")
	ids := map[*Step]string{}
	for i, s := range t.Steps {
		ids[s] = fmt.Sprintf("n%d", i+1)
	}
	for _, s := range t.Steps {
		text := mermaidText(Abbrev(s.Text, 80))
		switch s.Kind {
		case KindStart, KindEnd:
			pw.printf("  %s([\"%s\"])\n", ids[s], text)
		case KindDecision:
			pw.printf("  %s{\"%s\"}\n", ids[s], text)
		default:
			pw.printf("  %s[\"%s\"]\n", ids[s], text)
		}
	}
	for _, s := range t.Steps {
		for _, r := range s.Routes {
			if r.Label != "" {
				pw.printf("  %s -->|\"%s\"| %s\n", ids[s], mermaidText(r.Label), ids[r.To])
			} else {
				pw.printf("  %s --> %s\n", ids[s], ids[r.To])
			}
		}
	}
	return pw.err
}

// mermaidText escapes text for a quoted Mermaid label.
func mermaidText(s string) string {
	r := strings.NewReplacer(`"`, "#quot;", "\n", " ", "\r", "", "<", "#lt;", ">", "#gt;")
	return r.Replace(s)
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
