//go:build !linux

package agentmarket

import "os"

// Fdatasync is fsync where fdatasync(2) is not offered.
func Fdatasync(f *os.File) error { return f.Sync() }
