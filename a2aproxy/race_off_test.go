//go:build !race

package a2aproxy_test

const raceDetector = false
