package main

import (
	"os"
	"syscall"
)

// peerProcAttr puts a peer in a process group of its own (so its
// children stop with it) and has the kernel send it SIGTERM if this
// process dies first (killed, or a closed stdout): a peer does not
// outlive the benchmark. SIGTERM rather than SIGKILL: nginx's master
// then stops its workers, which a killed master leaves running.
func peerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// signalPeer sends SIGTERM (or SIGKILL) to the peer's process group.
func signalPeer(p *os.Process, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	if syscall.Kill(-p.Pid, sig) != nil {
		_ = p.Signal(sig)
	}
}
