package billing

import "github.com/agentmarket/agentmarket"

// MinorUnitDigits returns the number of decimal digits of the minor unit of
// a currency given as a lower-case ISO 4217 code: 2 for "usd" (cents), 0
// for "jpy", 3 for "kwd". An unknown currency is an Invalid error.
func MinorUnitDigits(currency string) (int, error) {
	d, ok := agentmarket.MinorUnitDigits(currency)
	if !ok {
		return 0, agentmarket.Errorf(agentmarket.Invalid, "unknown_currency",
			"currency %q is not one AgentMarket can bill in", currency)
	}
	return d, nil
}
