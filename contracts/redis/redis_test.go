package redis_test

import (
	"testing"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/redis/redistest"
	"github.com/agentmarket/agentmarket/contracts/storetest"
)

func TestSent(t *testing.T) {
	storetest.RunSent(t, func(t *testing.T) contracts.SentMessages { return redistest.Open(t) })
}

func TestOwners(t *testing.T) {
	storetest.RunOwners(t, func(t *testing.T) contracts.TaskOwners { return redistest.Open(t) })
}
