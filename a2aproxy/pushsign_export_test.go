package a2aproxy

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
)

// DeliverOnce makes one attempt of d, as the delivery loop does.
func (p *Proxy) DeliverOnce(ctx context.Context, d contracts.Delivery) {
	p.Push.init()
	if p.Logger == nil {
		p.Logger = slog.New(slog.DiscardHandler)
	}
	p.deliver(ctx, d)
}

// SealPushSecrets seals a buyer's token and credentials as pushSet does.
func (ps *Push) SealPushSecrets(c contracts.PushConfig, token, credentials string) ([]byte, error) {
	plain, _ := json.Marshal(pushSecrets{Token: token, Credentials: credentials})
	return ps.Sealer.Seal(plain, sealContext(c.ListingID, c.TaskID, c.ConfigID))
}

// DeliveryKind is what the meter's callback makes of a notification in
// version v, for coalescing.
func DeliveryKind(v wire.Version, body []byte) contracts.DeliveryKind {
	return deliveryKind(wire.Observe(v, wire.MethodStream, body))
}

// EnqueueNotification stores a notification of the agent (in version v)
// for cfg's webhook under id, as the meter's callback does once it has
// metered it.
func (p *Proxy) EnqueueNotification(ctx context.Context, cfg *contracts.PushConfig, id string, v wire.Version, body []byte) error {
	p.Push.init()
	return p.enqueueNotification(ctx, cfg, id, body, wire.Observe(v, wire.MethodStream, body))
}
