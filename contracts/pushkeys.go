package contracts

import (
	"context"
	"time"
)

// PushKey is a key the meters sign push deliveries with
// (a2aproxy/pushsign). Keys come in generations, one key each: the newest
// generation whose ActiveAt has come signs; every key is published in the
// marketplace's JWKS from CreatedAt until a retention window after the
// next generation took over, and then deleted.
type PushKey struct {
	// ID is the key's "kid" in signatures and in the JWKS.
	ID string
	// Generation is 1 for the first key, then one more for each rotation:
	// two processes that rotate at once make one key of a generation, not
	// two.
	Generation int64
	// Algorithm is the JWS "alg" the key signs with ("ES256").
	Algorithm string
	// Public is the public key, PKIX DER.
	Public []byte
	// Sealed is the private key, PKCS #8 DER encrypted by the signer (the
	// store keeps bytes).
	Sealed    []byte
	CreatedAt time.Time
	// ActiveAt is when the key starts signing: a new generation is
	// published some time before, so verifiers that cache the JWKS know it
	// by then.
	ActiveAt time.Time
}

// PushKeyStore keeps the push signing keys every meter and the
// marketplace share.
type PushKeyStore interface {
	// AddPushKey stores k unless a key of its generation exists (another
	// process rotated first); it reports whether k was stored. A key ID
	// another generation holds is a Conflict.
	AddPushKey(ctx context.Context, k PushKey) (bool, error)
	// PushKeys returns every key, newest generation first.
	PushKeys(ctx context.Context) ([]PushKey, error)
	// DeletePushKeys deletes the keys of generations below generation and
	// returns how many went.
	DeletePushKeys(ctx context.Context, below int64) (int64, error)
}
