package metrics

import (
	"regexp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Names lists the decree_ metric families the controller exports (the
// README documents each; the Grafana dashboard and the KEDA trigger may use
// only these). Histograms are listed by their family name; their series
// add _bucket, _sum and _count.
func Names() []string {
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		reg := &describer{ch: ch}
		(&stateCollector{}).Describe(ch)
		newEventSeries(reg)
		close(ch)
	}()
	var out []string
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			out = append(out, m[1])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// describer is a Registerer that only passes descriptors on.
type describer struct{ ch chan<- *prometheus.Desc }

func (d *describer) Register(c prometheus.Collector) error {
	c.Describe(d.ch)
	return nil
}

func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d *describer) Unregister(prometheus.Collector) bool { return false }
