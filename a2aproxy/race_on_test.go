//go:build race

package a2aproxy_test

// raceDetector: the race detector slows the store (a pure-Go SQLite)
// several times over; load tests run lighter under it.
const raceDetector = true
