package agentmarket

import (
	"strconv"
	"strings"
)

// CSVCell is s made safe to open in a spreadsheet: text that starts with
// a character a spreadsheet reads as the start of a formula (=, +, -, @,
// a tab or a carriage return) gets a leading apostrophe, so a listing name
// a seller wrote as =HYPERLINK(…) reaches a buyer's finance sheet as text.
// Numbers (a negative amount) are left as they are.
//
// Characters that reorder text (HasBidiControl) are dropped: a sheet or a
// text editor would show the cells after them reversed.
func CSVCell(s string) string {
	s = StripBidiControls(s)
	if s == "" || !strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return s
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return s
	}
	return "'" + s
}

// CSVRecord applies CSVCell to every cell of rec, in place, and returns it.
func CSVRecord(rec []string) []string {
	for i, s := range rec {
		rec[i] = CSVCell(s)
	}
	return rec
}
