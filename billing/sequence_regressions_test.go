package billing_test

// sequenceRegressions are buyer sequences that once broke an invariant of
// TestPropertyBuyerSequences; every run plays each of them before the
// random ones. When the test fails it prints the failing sequence shrunk
// to what still fails, as an element of this table: paste it here, with a
// comment saying what it found, and commit it with the fix. A seed alone
// ({Seed: n}) plays the seed's whole sequence.
var sequenceRegressions = []seqCase{
	// The rounding carry (97e2e0e): a stay of two days, canceled, and a
	// new one five hours later. Each invoice rounded on its own charged
	// 3875 cents for 38757355.324 micros (one cent less than the month's
	// amount rounded once); seed 23005 found it with the carry left out.
	// With Stripe, main still charged 3875 (f895457 fixed it): the same
	// three actions show it.
	{Seed: 23005, Months: 2, Actions: []seqAction{
		{At: seqAt("2026-06-07T01:19:13.063Z"), Org: "org_b", Kind: seqSubscribe, Plan: 3},
		{At: seqAt("2026-06-09T14:47:33.481Z"), Org: "org_b", Kind: seqCancel},
		{At: seqAt("2026-06-09T19:58:36.416Z"), Org: "org_b", Kind: seqSubscribe, Plan: 3},
	}},
}
