package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/decreehq/decree/controller/metrics"
)

// TestGrafanaDashboard: the dashboard is valid JSON in Grafana's shape,
// every panel queries the Prometheus data source variable, and every decree
// metric it uses is one the controller exports.
func TestGrafanaDashboard(t *testing.T) {
	data, err := os.ReadFile("grafana/decree.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title      string `json:"title"`
		UID        string `json:"uid"`
		Templating struct {
			List []struct{ Name, Type string } `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID         int    `json:"id"`
			Title      string `json:"title"`
			Datasource struct{ Type, UID string }
			Targets    []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) < 8 {
		t.Fatalf("dashboard %q (uid %q) with %d panels", d.Title, d.UID, len(d.Panels))
	}
	if len(d.Templating.List) == 0 || d.Templating.List[0].Type != "datasource" {
		t.Error("the dashboard has no data source variable")
	}
	exported := metrics.Names()
	used := map[string]bool{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q uses data source %q, not the variable", p.Title, p.Datasource.UID)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			names := metricName.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q queries no decree metric: %s", p.Title, tg.Expr)
			}
			for _, n := range names {
				base := n
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(n, suf); ok && slices.Contains(exported, b) {
						base = b
					}
				}
				if !slices.Contains(exported, base) {
					t.Errorf("panel %q uses %s, which the controller does not export (it exports %v)", p.Title, n, exported)
				}
				used[base] = true
			}
		}
	}
	if !used[metrics.RunnableMetric] {
		t.Errorf("the dashboard does not show %s", metrics.RunnableMetric)
	}
}

var metricName = regexp.MustCompile(`decree_[a-z_]+`)
