package billing

import (
	"context"

	"github.com/agentmarket/agentmarket/contracts"
)

// Apportion exposes apportion to the external tests.
var Apportion = apportion

// ContractParts are a contract's parts in a closed period, as CloseMonth
// rates them.
func ContractParts(ctx context.Context, s *Service, c *contracts.Contract, period Period) ([]Part, error) {
	parts, _, err := s.terms().contractParts(ctx, c, period, period.End)
	return parts, err
}

// ApplyCredit exposes applyCredit to the external tests.
var ApplyCredit = applyCredit
