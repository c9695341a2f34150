//go:build race

package checkpoint

// raceEnabled: the race detector makes the compressor and the tests' own
// loops 10-20 times slower, so the large-file tests use smaller files.
const raceEnabled = true
