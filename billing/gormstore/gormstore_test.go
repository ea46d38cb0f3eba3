package gormstore_test

import (
	"testing"

	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/billing/gormstore"
	"github.com/agentmarket/agentmarket/billing/storetest"
	"github.com/agentmarket/agentmarket/migrations/gormdb/gormdbtest"
)

func TestStore(t *testing.T) {
	for _, o := range gormdbtest.Openers {
		t.Run(o.Name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) billing.Store { return gormstore.New(o.Open(t).DB) })
		})
	}
}
