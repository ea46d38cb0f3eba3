package a2aproxy

import (
	"context"
	"fmt"
)

// switchRead is what the meter's reader of the kill switches keeps
// between reads: the version it last read, whether it read any, and the
// switches it acted on. Only that reader touches it (LoadKillSwitches
// before RunKillSwitches starts, then RunKillSwitches).
type switchRead struct {
	version int64
	loaded  bool
	acted   map[string]bool
}

// LoadKillSwitches reads the switches on, once, before the meter serves:
// a call a switch stops is not admitted in the moment before the first
// poll. An error leaves the meter with none on until a poll succeeds
// (/readyz says so: SwitchesHealth).
func (p *Proxy) LoadKillSwitches(ctx context.Context) error {
	if p.Switches == nil {
		return nil
	}
	return p.readSwitches(ctx, &p.Switches.read)
}

// switchesUnread records and logs a failed read of the switches.
func (p *Proxy) switchesUnread(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	p.Switches.readErr.Store(&err)
	p.Logger.WarnContext(ctx, "kill switches not read; the meter keeps those it last read", "err", err)
	return err
}

// SwitchesHealth says whether the meter reads the kill switches (for
// /readyz): the last read's failure, or how many switches are on.
func (p *Proxy) SwitchesHealth() (string, error) {
	b := p.Switches
	if b == nil {
		return "not used", nil
	}
	if e := b.readErr.Load(); e != nil {
		return "", fmt.Errorf("the kill switches cannot be read (the meter keeps those it last read): %w", *e)
	}
	n := 0
	if set := b.set.Load(); set != nil {
		n = len(set.listings) + len(set.sellers) + len(set.buyers) + len(set.keys) + len(set.tasks)
	}
	return fmt.Sprintf("%d on", n), nil
}
