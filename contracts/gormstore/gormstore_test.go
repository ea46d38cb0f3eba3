package gormstore_test

import (
	"testing"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/contracts/storetest"
	"github.com/agentmarket/agentmarket/migrations/gormdb/gormdbtest"
)

func TestStore(t *testing.T) {
	for _, o := range gormdbtest.Openers {
		t.Run(o.Name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) interface {
				contracts.Store
				contracts.PolicyStore
			} {
				return gormstore.New(o.Open(t).DB)
			})
		})
	}
}
