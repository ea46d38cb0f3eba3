package agentmarket

import (
	"os"
	"syscall"
)

// Fdatasync flushes f's data and what reading it back needs (its size),
// not its other metadata (times): cheaper than fsync for an append.
func Fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
