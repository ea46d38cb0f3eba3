package main

import (
	"strings"
	"testing"
)

// TestRoundOrder: the peers keep their order; the meter's phases come
// last, each round starting one phase later.
func TestRoundOrder(t *testing.T) {
	ts := []target{{name: "nginx/1.0"}, {name: "lean/1.0"}, {name: "meter/1.0"}, {name: "meter/0.3"}, {name: "meter/rest"}}
	names := func(ts []target) string {
		var s []string
		for _, t := range ts {
			s = append(s, t.name)
		}
		return strings.Join(s, " ")
	}
	for round, want := range map[int]string{
		1: "nginx/1.0 lean/1.0 meter/1.0 meter/0.3 meter/rest",
		2: "nginx/1.0 lean/1.0 meter/0.3 meter/rest meter/1.0",
		3: "nginx/1.0 lean/1.0 meter/rest meter/1.0 meter/0.3",
		4: "nginx/1.0 lean/1.0 meter/1.0 meter/0.3 meter/rest",
	} {
		if got := names(roundOrder(ts, round)); got != want {
			t.Errorf("round %d: %s, want %s", round, got, want)
		}
	}
	if got := names(ts); got != "nginx/1.0 lean/1.0 meter/1.0 meter/0.3 meter/rest" {
		t.Errorf("the targets were reordered in place: %s", got)
	}
}
