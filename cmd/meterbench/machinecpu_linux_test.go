package main

import "testing"

func TestParseMachineStat(t *testing.T) {
	busy, total, ok := parseMachineStat([]byte("cpu  100 5 50 800 20 3 2 0 7 0\ncpu0 1 2 3 4\n"))
	if !ok || total != 980 || busy != 160 {
		t.Errorf("parseMachineStat = %d %d %v, want 160 busy of 980", busy, total, ok)
	}
}
