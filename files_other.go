//go:build !unix

package agentmarket

import "os"

// LockDir only creates the lock file where flock is missing: one process
// per directory is then the operator's duty.
func LockDir(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
}

// UnlockDir releases a LockDir.
func UnlockDir(f *os.File) { f.Close() }
