//go:build unix

package agentmarket

import (
	"errors"
	"os"
	"syscall"
)

// LockDir takes an exclusive, non-blocking flock on path (a lock file in
// the directory): two processes appending to one set of files would
// interleave their records. The kernel drops the lock when the process
// dies, however it dies. UnlockDir releases it.
func LockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errors.New("the directory is in use by another process (or another store in this one)")
		}
		return nil, err
	}
	return f, nil
}

// UnlockDir releases a LockDir.
func UnlockDir(f *os.File) {
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	f.Close()
}
