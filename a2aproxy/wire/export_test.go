package wire

// ValidJSON exposes the validator to the differential fuzz test in
// package wire_test.
var ValidJSON = validJSON
