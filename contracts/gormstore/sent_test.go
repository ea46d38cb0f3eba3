package gormstore_test

import (
	"testing"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/contracts/storetest"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

func TestSentStore(t *testing.T) {
	for _, o := range relationaltest.Openers {
		t.Run(o.Name, func(t *testing.T) {
			storetest.RunSent(t, func(t *testing.T) contracts.SentMessages { return gormstore.New(o.Open(t).DB) })
		})
	}
}
