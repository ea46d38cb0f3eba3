package a2aproxy

import "testing"

func TestTraceparent(t *testing.T) {
	in := parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if in.traceID != "4bf92f3577b34da6a3ce929d0e0e4736" || in.spanID == "00f067aa0ba902b7" || len(in.spanID) != 16 {
		t.Fatalf("kept trace %+v", in)
	}
	if got := in.child(); got[:36] != "00-4bf92f3577b34da6a3ce929d0e0e4736-" || got[len(got)-3:] != "-01" {
		t.Fatalf("child %s", got)
	}
	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"} {
		tc := parseTraceparent(bad)
		if len(tc.traceID) != 32 || tc.traceID == "00000000000000000000000000000000" || tc.traceID == "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("%q: trace %q, want a fresh one", bad, tc.traceID)
		}
	}
}
