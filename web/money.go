package web

import (
	"html"
	"html/template"
	"strconv"
	"strings"

	"github.com/agentmarket/agentmarket/billing"
)

// Money is shown from integers only: micros (1e-6 of the currency) and
// minor units (cents), never through a float.

const microsPerUnit = 1_000_000

var symbols = map[string]string{"usd": "$", "eur": "€", "gbp": "£", "jpy": "¥"}

// minorDigits is the currency's minor unit digits (2 for an unknown one,
// which billing refuses anyway).
func minorDigits(currency string) int {
	d, err := billing.MinorUnitDigits(currency)
	if err != nil {
		return 2
	}
	return d
}

// minorUnitMicros is one minor unit of the currency (a cent) in micros.
func minorUnitMicros(currency string) int64 {
	m := int64(microsPerUnit)
	for range minorDigits(currency) {
		m /= 10
	}
	return m
}

// abs64 returns |n| as a uint64, correct for math.MinInt64 too.
func abs64(n int64) uint64 {
	if n < 0 {
		return uint64(-(n + 1)) + 1
	}
	return uint64(n)
}

// groupThousands writes n with commas: 1234567 → "1,234,567".
func groupThousands(n uint64) string {
	s := strconv.FormatUint(n, 10)
	if len(s) <= 3 {
		return s
	}
	var b strings.Builder
	pre := len(s) % 3
	if pre > 0 {
		b.WriteString(s[:pre])
	}
	for i := pre; i < len(s); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

// withCurrency puts the sign and the currency around an unsigned amount.
func withCurrency(neg bool, amount, currency string) string {
	sign := ""
	if neg {
		sign = "-"
	}
	if sym, ok := symbols[currency]; ok {
		return sign + sym + amount
	}
	if currency == "" {
		return sign + amount
	}
	return sign + amount + " " + strings.ToUpper(currency)
}

// formatMicros shows an amount of micros in its currency with at least the
// currency's minor digits and as many more as the amount needs, so nothing
// is rounded away: 19000000 usd → "$19.00", 2000 usd → "$0.002",
// 12345 usd → "$0.012345", 1500000000 jpy → "¥1,500".
func formatMicros(m int64, currency string) string {
	a := abs64(m)
	whole, frac := a/microsPerUnit, a%microsPerUnit
	fs := strconv.FormatUint(frac+microsPerUnit, 10)[1:] // six digits, zero padded
	fs = strings.TrimRight(fs, "0")
	if d := minorDigits(currency); len(fs) < d {
		fs += strings.Repeat("0", d-len(fs))
	}
	s := groupThousands(whole)
	if fs != "" {
		s += "." + fs
	}
	return withCurrency(m < 0, s, currency)
}

// formatCents shows an amount (a spend, a cost: not a price) rounded half
// up to the currency's minor unit: 24834 usd → "$0.02". An amount that is
// not zero but rounds to zero reads "under $0.01".
func formatCents(m int64, currency string) string {
	d := minorDigits(currency)
	per := uint64(microsPerUnit)
	for range d {
		per /= 10
	}
	a := abs64(m)
	minor := a / per
	if a%per*2 >= per {
		minor++
	}
	if minor == 0 && a != 0 {
		return "under " + formatMinor(1, currency)
	}
	if minor > uint64(1<<63-1) {
		minor = uint64(1<<63 - 1)
	}
	n := int64(minor)
	if m < 0 {
		n = -n
	}
	return formatMinor(n, currency)
}

// moneyHTML is an amount as pages show it: to the cent (formatCents),
// the exact micros on hover (title); both the same when the amount is
// whole cents.
func moneyHTML(m int64, currency string) template.HTML {
	shown, exact := formatCents(m, currency), formatMicros(m, currency)
	if shown == exact {
		return template.HTML(html.EscapeString(shown))
	}
	return template.HTML(`<span class="money" title="` + html.EscapeString(exact) + `">` + html.EscapeString(shown) + `</span>`)
}

// formatMinor shows an amount of minor units (cents) with the currency's
// digits: 1999 usd → "$19.99".
func formatMinor(n int64, currency string) string {
	d := minorDigits(currency)
	a := abs64(n)
	if d == 0 {
		return withCurrency(n < 0, groupThousands(a), currency)
	}
	p := uint64(1)
	for range d {
		p *= 10
	}
	fs := strconv.FormatUint(a%p+p, 10)[1:]
	return withCurrency(n < 0, groupThousands(a/p)+"."+fs, currency)
}

// microsInput shows micros as a form value in currency units, the way
// parseAmount reads it back: 19000000 → "19", 2000 → "0.002".
func microsInput(m int64) string {
	a := abs64(m)
	s := strconv.FormatUint(a/microsPerUnit, 10)
	if fs := strings.TrimRight(strconv.FormatUint(a%microsPerUnit+microsPerUnit, 10)[1:], "0"); fs != "" {
		s += "." + fs
	}
	if m < 0 {
		s = "-" + s
	}
	return s
}

// parseAmount reads an amount typed in currency units ("19", "19.99",
// "0.000003", "1,250.50") into micros, exactly. A leading minus is kept, so
// that the domain's own rule (no negative prices) reports it. It returns a
// message when the text is not an amount.
func parseAmount(s string) (int64, string) {
	s = strings.ReplaceAll(strings.TrimSpace(s), ",", "")
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" && (!hasDot || frac == "") {
		return 0, "must be an amount like 19 or 0.002"
	}
	for _, part := range []string{whole, frac} {
		for _, c := range part {
			if c < '0' || c > '9' {
				return 0, "must be an amount like 19 or 0.002 (digits and one decimal point)"
			}
		}
	}
	if len(frac) > 6 {
		return 0, "can have at most 6 decimal places (amounts are kept in millionths)"
	}
	var w uint64
	if whole != "" {
		var err error
		if w, err = strconv.ParseUint(whole, 10, 64); err != nil || w > (1<<63-1)/microsPerUnit {
			return 0, "is too large"
		}
	}
	f := uint64(0)
	if frac != "" {
		f, _ = strconv.ParseUint(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	n := int64(w*microsPerUnit + f)
	if n < 0 {
		return 0, "is too large"
	}
	if neg {
		n = -n
	}
	return n, ""
}

// formatCount writes a count with thousands separators.
func formatCount(n int64) string {
	if n < 0 {
		return "-" + groupThousands(abs64(n))
	}
	return groupThousands(uint64(n))
}

// formatDuration shows compute milliseconds: "850 ms", "12.3 s", "4 h 05 min".
func formatDuration(ms int64) string {
	switch {
	case ms < 1000:
		return strconv.FormatInt(ms, 10) + " ms"
	case ms < 60_000:
		return strconv.FormatInt(ms/1000, 10) + "." + strconv.FormatInt(ms%1000/100, 10) + " s"
	case ms < 3_600_000:
		return strconv.FormatInt(ms/60_000, 10) + " min " + strconv.FormatInt(ms%60_000/1000, 10) + " s"
	}
	m := ms / 60_000
	return formatCount(m/60) + " h " + strconv.FormatInt(m%60+100, 10)[1:] + " min"
}
