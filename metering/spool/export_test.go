package spool

import "github.com/agentmarket/agentmarket/metering"

// EncodeRecord exposes the spool's record encoding to the external tests,
// which forge torn and corrupt tails with it.
func EncodeRecord(u metering.Usage) []byte {
	b, err := appendRecord(nil, &u)
	if err != nil {
		panic(err)
	}
	return b
}
