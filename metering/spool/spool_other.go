//go:build !unix

package spool

import "os"

// lockDir only creates the lock file where flock is missing: one process
// per spool directory is then the operator's duty.
func lockDir(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
}

func unlockDir(f *os.File) { f.Close() }
