//go:build !linux

package main

import (
	"os"
	"syscall"
)

func peerProcAttr() *syscall.SysProcAttr { return nil }

// signalPeer ends the peer; only Linux puts it in a group of its own, so
// elsewhere its children (nginx's workers) may outlive it.
func signalPeer(p *os.Process, kill bool) {
	if kill || p.Signal(os.Interrupt) != nil {
		_ = p.Kill()
	}
}
