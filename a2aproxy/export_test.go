package a2aproxy

import (
	"context"
	"time"
)

// CheckPushURL exposes the webhook check to the tests.
func (ps *Push) CheckPushURL(ctx context.Context, raw string) error { return ps.checkURL(ctx, raw) }

// Backoff exposes the retry delay to the tests.
func (ps *Push) Backoff(n int) time.Duration { ps.init(); return ps.backoff(n) }

var NotificationVersion = notificationVersion
