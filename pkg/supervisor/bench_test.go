//go:build linux

package supervisor

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// BenchmarkSupervisedStart measures what the supervisor adds to one
// attempt: `bash -c true` started, waited for and confirmed gone under a
// supervisor, against the same command run directly, in the same run.
func BenchmarkSupervisedStart(b *testing.B) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		b.Skip("bash not found")
	}
	var direct, supervised time.Duration
	for range b.N {
		t0 := time.Now()
		if err := exec.Command(bash, "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		p, err := Start(Spec{Path: bash, Args: []string{"-c", "true"}, Env: os.Environ(), Grace: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		if st, err := p.Wait(); err != nil || st.ExitStatus() != 0 {
			b.Fatalf("status %v, %v", st, err)
		}
		direct += t1.Sub(t0)
		supervised += time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(direct.Microseconds())/n/1000, "direct_ms/op")
	b.ReportMetric(float64(supervised.Microseconds())/n/1000, "supervised_ms/op")
	b.ReportMetric(supervised.Seconds()/direct.Seconds(), "supervised/direct")
}
