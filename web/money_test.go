package web

import (
	"math"
	"testing"
)

func TestFormatMicros(t *testing.T) {
	for _, c := range []struct {
		micros   int64
		currency string
		want     string
	}{
		{0, "usd", "$0.00"},
		{19_000_000, "usd", "$19.00"},
		{19_990_000, "usd", "$19.99"},
		{2000, "usd", "$0.002"},
		{12345, "usd", "$0.012345"},
		{1, "usd", "$0.000001"},
		{-2_500_000, "usd", "-$2.50"},
		{1_234_567_890_000, "usd", "$1,234,567.89"},
		{1_500_000_000, "jpy", "¥1,500"},
		{1_500_500_000, "jpy", "¥1,500.5"},
		{1_500_000, "kwd", "1.500 KWD"},
		{5_500_000, "eur", "€5.50"},
		{7_000_000, "chf", "7.00 CHF"},
		{math.MaxInt64, "usd", "$9,223,372,036,854.775807"},
		{math.MinInt64, "usd", "-$9,223,372,036,854.775808"},
	} {
		if got := formatMicros(c.micros, c.currency); got != c.want {
			t.Errorf("formatMicros(%d, %s) = %q, want %q", c.micros, c.currency, got, c.want)
		}
	}
}

func TestFormatMinor(t *testing.T) {
	for _, c := range []struct {
		minor    int64
		currency string
		want     string
	}{
		{1999, "usd", "$19.99"},
		{5, "usd", "$0.05"},
		{-5, "usd", "-$0.05"},
		{1500, "jpy", "¥1,500"},
		{1500, "kwd", "1.500 KWD"},
		{123456789, "eur", "€1,234,567.89"},
	} {
		if got := formatMinor(c.minor, c.currency); got != c.want {
			t.Errorf("formatMinor(%d, %s) = %q, want %q", c.minor, c.currency, got, c.want)
		}
	}
}

func TestParseAmount(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"19", 19_000_000, true},
		{"19.99", 19_990_000, true},
		{" 0.002 ", 2000, true},
		{".5", 500_000, true},
		{"1,250.50", 1_250_500_000, true},
		{"0.000001", 1, true},
		{"-5", -5_000_000, true},
		{"0.0000001", 0, false},
		{"19 dollars", 0, false},
		{"1e3", 0, false},
		{"", 0, false},
		{".", 0, false},
		{"9223372036855", 0, false},
		{"9223372036854.9", 0, false},
		{"9223372036853.999999", 9_223_372_036_853_999_999, true},
	} {
		got, msg := parseAmount(c.in)
		if (msg == "") != c.ok || got != c.want {
			t.Errorf("parseAmount(%q) = %d, %q; want %d, ok=%v", c.in, got, msg, c.want, c.ok)
		}
		if c.ok && c.want >= 0 {
			if back, _ := parseAmount(microsInput(got)); back != got {
				t.Errorf("microsInput(%d) = %q does not read back", got, microsInput(got))
			}
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for ms, want := range map[int64]string{850: "850 ms", 12_345: "12.3 s", 125_000: "2 min 5 s", 14_700_000: "4 h 05 min"} {
		if got := formatDuration(ms); got != want {
			t.Errorf("formatDuration(%d) = %q, want %q", ms, got, want)
		}
	}
}

func TestNiceMax(t *testing.T) {
	for _, c := range []struct{ v, want int64 }{{0, 0}, {1, 2}, {2, 2}, {3, 4}, {5, 10}, {14_859, 20_000}, {29_718, 40_000},
		{40_001, 100_000}, {1_234_567, 2_000_000}, {math.MaxInt64, math.MaxInt64}} {
		if got := niceMax(c.v); got != c.want {
			t.Errorf("niceMax(%d) = %d, want %d", c.v, got, c.want)
		}
	}
}

func TestFormatCents(t *testing.T) {
	for _, c := range []struct {
		micros   int64
		currency string
		want     string
	}{
		{24_834, "usd", "$0.02"}, {25_000, "usd", "$0.03"}, {24_999, "usd", "$0.02"}, {1_234_567, "usd", "$1.23"},
		{4_999, "usd", "under $0.01"}, {5_000, "usd", "$0.01"}, {0, "usd", "$0.00"}, {-1_235_000, "usd", "-$1.24"},
		{1_500_400_000, "jpy", "¥1,500"}, {1_500_500_000, "jpy", "¥1,501"}, {1_234_567, "kwd", "1.235 KWD"},
		{math.MaxInt64, "usd", "$9,223,372,036,854.78"},
	} {
		if got := formatCents(c.micros, c.currency); got != c.want {
			t.Errorf("formatCents(%d, %s) = %q, want %q", c.micros, c.currency, got, c.want)
		}
	}
	if got := moneyHTML(19_000_000, "usd"); got != "$19.00" {
		t.Errorf("whole cents: %q, want no title", got)
	}
}
