package wire

// The dialect's key spellings, for the tables in package wire_test.
var (
	SDKSnake = sdkSnake
	SDKCamel = sdkCamel
)
