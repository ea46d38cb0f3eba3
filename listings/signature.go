package listings

import (
	"context"
	"time"

	"github.com/agentmarket/agentmarket"
)

// SignatureStatus is what the marketplace found of a card's signatures.
type SignatureStatus string

const (
	SignatureNone     SignatureStatus = "unsigned" // the card carries no signatures
	SignatureVerified SignatureStatus = "verified" // one of them verifies
	SignatureFailed   SignatureStatus = "failed"   // none does: the detail says why
)

// CardSignature is the result of checking a card's signatures (A2A 1.0
// §8.4: a JWS over the card's canonical form) when the card was taken.
type CardSignature struct {
	Status SignatureStatus `json:"status"`
	// KeyID and JKU are those of the signature that verified (or of the
	// last one tried, when none did).
	KeyID string `json:"key_id,omitempty"`
	JKU   string `json:"jku,omitempty"`
	// Signer is who vouches for the card: the host serving the key set
	// the signature names (jku), or "the seller's registered keys".
	Signer    string    `json:"signer,omitempty"`
	Detail    string    `json:"detail,omitempty"`
	CheckedAt time.Time `json:"checked_at"`
}

// SignaturePolicy says what becomes of a card whose signatures do not
// verify.
type SignaturePolicy string

const (
	// SignaturesMark takes any valid card and records what its
	// signatures showed (the default).
	SignaturesMark SignaturePolicy = "mark"
	// SignaturesRequire takes only a card with a signature that verifies:
	// a card without one is refused, and a refresh that brings one keeps
	// the card in force and marks the listing unhealthy.
	SignaturesRequire SignaturePolicy = "require"
)

// CardVerifier checks the signatures of a card (listings/cardsig).
type CardVerifier interface {
	// VerifyCard checks card's signatures with keys (a JWKS the seller
	// registered; empty: the key set each signature's jku names, when it
	// is on a host that serves the card: cardURL's, where the card was
	// read ("" for a card given inline), or one its interfaces name).
	VerifyCard(ctx context.Context, card, keys []byte, cardURL string) CardSignature
	// CheckKeys reports why keys is not a usable JWKS, nil when it is.
	CheckKeys(keys []byte) error
}

func validateSigning(fe *agentmarket.Fields, v CardVerifier, policy *SignaturePolicy, keys []byte) {
	if policy != nil && *policy != SignaturesMark && *policy != SignaturesRequire {
		fe.Add("card_signatures", "enum", `card_signatures must be "mark" or "require"`)
	}
	if len(keys) > MaxCardBytes {
		fe.Add("card_keys", "max_size", "card_keys must be at most 64 KiB")
		return
	}
	if len(keys) > 0 && v != nil {
		if err := v.CheckKeys(keys); err != nil {
			fe.Add("card_keys", "jwks", "card_keys must be a JSON Web Key Set ({\"keys\":[...]}) of public keys: %s", err.Error())
		}
	}
}

// checkSignature verifies raw's signatures (the card read from cardURL)
// for a listing with keys and policy: a refusal under SignaturesRequire is
// an Invalid error on card.signatures.
func (s *Service) checkSignature(ctx context.Context, raw []byte, cardURL string, keys []byte, policy SignaturePolicy) (CardSignature, error) {
	if s.Verifier == nil {
		return CardSignature{Status: SignatureNone, CheckedAt: s.now()}, nil
	}
	sig := s.Verifier.VerifyCard(ctx, raw, keys, cardURL)
	sig.CheckedAt = s.now()
	if policy == SignaturesRequire && sig.Status != SignatureVerified {
		why := "the card is not signed"
		if sig.Status == SignatureFailed {
			why = "no signature of the card verifies: " + sig.Detail
		}
		var fe agentmarket.Fields
		fe.Add("card.signatures", "verified", "%s (this listing's card_signatures is \"require\")", why)
		return sig, fe.Err("card_signature_refused", why)
	}
	return sig, nil
}
