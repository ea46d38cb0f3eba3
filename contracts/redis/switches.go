package redis

import (
	"context"

	"github.com/agentmarket/agentmarket/contracts"
)

var _ contracts.SwitchSignal = (*Store)(nil)

// switchesChannel is where a change of the kill switches is published.
func (s *Store) switchesChannel() string { return s.prefix + "ks" }

// SwitchesChanged implements contracts.SwitchSignal: every meter
// subscribed (WatchSwitches) reads the switches at once. A publish that
// fails is not retried: the meters' poll of the database sees the change
// within its interval.
func (s *Store) SwitchesChanged(ctx context.Context) error {
	if err := s.up(); err != nil {
		return err
	}
	return s.failed(s.c.Publish(ctx, s.switchesChannel(), "1").Err())
}

// WatchSwitches says, until ctx ends, when the kill switches changed. The
// subscription reconnects by itself after an outage; what changed
// meanwhile the meter's poll finds.
func (s *Store) WatchSwitches(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	sub := s.c.Subscribe(ctx, s.switchesChannel())
	go func() {
		defer sub.Close()
		ch := sub.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-ch:
				if !ok {
					return
				}
				select {
				case out <- struct{}{}:
				default: // a read is already due
				}
			}
		}
	}()
	return out
}
