package agentmarket

import (
	"slices"
	"strings"
)

// minorUnitDigits is the ISO 4217 exponent of the currencies AgentMarket
// bills in: how many decimal digits the minor unit has. A three-letter
// code absent here is refused wherever a price is made (a plan, an offer),
// so that every contract can be rated and exported.
var minorUnitDigits = map[string]int{
	// Zero-decimal currencies.
	"bif": 0, "clp": 0, "djf": 0, "gnf": 0, "isk": 0, "jpy": 0, "kmf": 0, "krw": 0,
	"pyg": 0, "rwf": 0, "ugx": 0, "vnd": 0, "vuv": 0, "xaf": 0, "xof": 0, "xpf": 0,
	// Three-decimal currencies.
	"bhd": 3, "iqd": 3, "jod": 3, "kwd": 3, "lyd": 3, "omr": 3, "tnd": 3,
	// Two-decimal currencies.
	"aed": 2, "ars": 2, "aud": 2, "bdt": 2, "bgn": 2, "brl": 2, "cad": 2, "chf": 2,
	"cny": 2, "cop": 2, "czk": 2, "dkk": 2, "egp": 2, "eur": 2, "gbp": 2, "ghs": 2,
	"hkd": 2, "huf": 2, "idr": 2, "ils": 2, "inr": 2, "kes": 2, "kzt": 2, "lkr": 2,
	"mad": 2, "mxn": 2, "myr": 2, "ngn": 2, "nok": 2, "nzd": 2, "pen": 2, "php": 2,
	"pkr": 2, "pln": 2, "qar": 2, "ron": 2, "rsd": 2, "sar": 2, "sek": 2, "sgd": 2,
	"thb": 2, "try": 2, "twd": 2, "uah": 2, "usd": 2, "uyu": 2, "zar": 2,
}

// MinorUnitDigits returns the number of decimal digits of the minor unit of
// a currency given as a lower-case ISO 4217 code (2 for "usd", 0 for
// "jpy", 3 for "kwd"), and whether AgentMarket bills in it.
func MinorUnitDigits(currency string) (int, bool) {
	d, ok := minorUnitDigits[currency]
	return d, ok
}

// Currencies lists the codes AgentMarket bills in, sorted.
func Currencies() []string {
	out := make([]string, 0, len(minorUnitDigits))
	for c := range minorUnitDigits {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// CurrencyList is Currencies joined for a message.
func CurrencyList() string { return strings.Join(Currencies(), ", ") }
