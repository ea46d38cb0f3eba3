package web

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestAuditChanges(t *testing.T) {
	before := json.RawMessage(`{"ID":"ctr_1","Status":"past_due","MonthlyBudgetMicros":null,"PlanVersion":1,"UpdatedAt":"x"}`)
	after := json.RawMessage(`{"ID":"ctr_1","Status":"canceled","MonthlyBudgetMicros":5000000,"PlanVersion":1,"UpdatedAt":"y","cancel_reason":"moved"}`)
	got, created, removed := auditChanges(before, after)
	want := []fieldChange{{Field: "status", From: "past due", To: "canceled"}, {Field: "monthly budget", From: "none", To: "5.00"}, {Field: "cancel reason", From: "none", To: "moved"}}
	if created || removed || !reflect.DeepEqual(got, want) {
		t.Errorf("auditChanges = %+v %v %v, want %+v", got, created, removed, want)
	}
	if _, created, _ := auditChanges(json.RawMessage(`null`), after); !created {
		t.Error("an object from null is created")
	}
	if _, _, removed := auditChanges(after, json.RawMessage(`null`)); !removed {
		t.Error("an object to null is removed")
	}
	for in, want := range map[string]string{"BuyerOrgID": "buyer org ID", "monthly_budget_micros": "monthly budget", "ptype": "ptype", "APIKeyID": "api key ID"} {
		if got := fieldWords(in); got != want {
			t.Errorf("fieldWords(%q) = %q, want %q", in, got, want)
		}
	}
}
