package checkpoint

import (
	"fmt"
	"testing"
)

func BenchmarkMarshalManifest(b *testing.B) {
	m := &Manifest{Files: map[string]Entry{}}
	for i := 0; i < 20000; i++ {
		m.Files[fmt.Sprintf("d%02d/e%02d/f%05d.go", i/1000, i/20%50, i)] = Entry{SHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", Size: int64(i), Mode: ModeFile}
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		data, _ := MarshalManifest(m)
		UnmarshalManifest(data)
	}
}
