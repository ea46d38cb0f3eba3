package agentmarket_test

import (
	"testing"

	"github.com/agentmarket/agentmarket"
)

func TestCSVCell(t *testing.T) {
	for in, want := range map[string]string{
		"":                           "",
		"Contract drafter":           "Contract drafter",
		`=HYPERLINK("http://x","y")`: `'=HYPERLINK("http://x","y")`,
		"+cmd|' /C calc'!A0":         "'+cmd|' /C calc'!A0",
		"-2+3":                       "'-2+3",
		"@SUM(A1)":                   "'@SUM(A1)",
		"\t=1":                       "'\t=1",
		"-1.500000":                  "-1.500000",
		"-42":                        "-42",
		"a=b":                        "a=b",
	} {
		if got := agentmarket.CSVCell(in); got != want {
			t.Errorf("CSVCell(%q) = %q, want %q", in, got, want)
		}
	}
}
