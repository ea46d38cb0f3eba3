package gormstore_test

import (
	"testing"

	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/billing/gormstore"
	"github.com/agentmarket/agentmarket/billing/storetest"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

func TestStore(t *testing.T) {
	for _, o := range relationaltest.Openers {
		t.Run(o.Name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) billing.Store { return gormstore.New(o.Open(t).DB) })
		})
	}
}
