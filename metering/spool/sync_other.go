//go:build !linux

package spool

import "os"

// fdatasync is fsync where fdatasync(2) is not offered.
func fdatasync(f *os.File) error { return f.Sync() }
