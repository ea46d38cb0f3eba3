package a2aproxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket/listings/agentcard"
)

// SecuritySchemeName names the marketplace's bearer scheme in proxied cards.
const SecuritySchemeName = "agentmarket"

// ProxiedCard is the seller's card as the buyer's orchestrator must see
// it: endpoints rewritten to the meter (JSON-RPC and HTTP+JSON, in each
// version the seller offers; the meter bridges to the agent's own), the security scheme replaced by the
// marketplace's bearer key (and the skills' own requirements, which name
// the seller's schemes, dropped), push notifications on only where the meter
// relays them (push) and the agent offers them, signatures dropped (they no longer match). Every other
// member is kept as the seller wrote it.
//
// A 1.0 card's security requirement is written in the form its reader
// parses (see wantsProtoJSON); protoJSON says the reader asked for A2A 1.0.
func ProxiedCard(raw []byte, card *agentcard.Card, endpoint string, push, protoJSON bool) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("card: %w", err)
	}
	set := func(k string, v any) {
		b, _ := json.Marshal(v)
		m[k] = b
	}
	versions := card.ProtocolVersions
	if _, ok := m["supportedInterfaces"]; ok {
		var ifaces []map[string]string
		for _, v := range versions {
			for _, b := range []string{agentcard.BindingJSONRPC, agentcard.BindingHTTPJSON} {
				ifaces = append(ifaces, map[string]string{"url": endpoint, "protocolBinding": b, "protocolVersion": v})
			}
		}
		set("supportedInterfaces", ifaces)
		set("securitySchemes", map[string]any{SecuritySchemeName: map[string]any{
			"httpAuthSecurityScheme": map[string]string{"scheme": "Bearer", "description": "An AgentMarket API key (amk_…) of your organisation."},
		}})
		var scopes any = []string{}
		if protoJSON || sellerScopesAreObjects(m) {
			scopes = map[string][]string{"list": {}}
		}
		set("securityRequirements", []any{map[string]any{"schemes": map[string]any{SecuritySchemeName: scopes}}})
		delete(m, "security")
		dropSkillSecurity(m)
		// A 1.0 card may also carry 0.3 fields for old clients.
		if _, ok := m["url"]; ok {
			set("url", endpoint)
			set("preferredTransport", agentcard.BindingJSONRPC)
			delete(m, "additionalInterfaces")
		}
	} else {
		set("url", endpoint)
		set("preferredTransport", agentcard.BindingJSONRPC)
		set("additionalInterfaces", []map[string]string{
			{"url": endpoint, "transport": agentcard.BindingJSONRPC},
			{"url": endpoint, "transport": agentcard.BindingHTTPJSON},
		})
		set("securitySchemes", map[string]any{SecuritySchemeName: map[string]string{
			"type": "http", "scheme": "bearer", "description": "An AgentMarket API key (amk_…) of your organisation.",
		}})
		set("security", []any{map[string][]string{SecuritySchemeName: {}}})
		dropSkillSecurity(m)
	}
	if caps, ok := m["capabilities"]; ok {
		var c map[string]json.RawMessage
		if json.Unmarshal(caps, &c) == nil {
			c["pushNotifications"] = json.RawMessage(fmt.Sprint(push))
			b, _ := json.Marshal(c)
			m["capabilities"] = b
		}
	}
	delete(m, "signatures")
	return json.Marshal(m)
}

// The scopes of a 1.0 security requirement come in two forms, and no
// client of 2026 reads both. The proto and the 1.0 JSON schema define
// them as a StringList message, {"list": [...]}: ProtoJSON parsers (the
// Python, JavaScript, Java and .NET SDKs) and schema-checking clients
// need that. The official Go SDK (a2a-go v2.3.1) reads only a bare array,
// ["..."], and refuses the whole card otherwise. So the form follows the
// reader (scopesForm): a client that asks for A2A 1.0 (A2A-Version 1.x,
// which §3.6.1 has 1.0 clients send, as the JavaScript SDK does) gets the
// proto's form; one that names no version (which §3.6.2 reads as 0.3, and
// is what a2a-go v2.3.1 sends for a card) gets the form the seller's own
// card uses, which the seller's clients read, and the bare array when the
// seller's card has no requirement.

// wantsProtoJSON reports whether a card fetch asked for A2A 1.0 (any 1.x),
// by the A2A-Version header or query parameter (§3.6.1).
func wantsProtoJSON(versionHeader, versionQuery string) bool {
	v := strings.TrimSpace(versionHeader)
	if v == "" {
		v = strings.TrimSpace(versionQuery)
	}
	major, _, _ := strings.Cut(v, ".")
	return major == "1"
}

// sellerScopesAreObjects reports whether the seller's 1.0 card writes the
// scopes of its security requirements (its own or its skills') as
// StringList objects rather than bare arrays.
func sellerScopesAreObjects(card map[string]json.RawMessage) bool {
	lists := []json.RawMessage{card["securityRequirements"]}
	var skills []map[string]json.RawMessage
	_ = json.Unmarshal(card["skills"], &skills)
	for _, sk := range skills {
		lists = append(lists, sk["securityRequirements"])
	}
	for _, l := range lists {
		var reqs []struct {
			Schemes map[string]json.RawMessage `json:"schemes"`
		}
		_ = json.Unmarshal(l, &reqs)
		for _, r := range reqs {
			for _, scopes := range r.Schemes {
				if b := bytes.TrimSpace(scopes); len(b) > 0 {
					return b[0] == '{'
				}
			}
		}
	}
	return false
}

// dropSkillSecurity removes the skills' own security requirements (1.0
// securityRequirements, 0.3 security): they name the seller's schemes,
// which the proxied card no longer has; the meter's key covers every
// skill.
func dropSkillSecurity(card map[string]json.RawMessage) {
	var skills []map[string]json.RawMessage
	if json.Unmarshal(card["skills"], &skills) != nil {
		return
	}
	changed := false
	for _, sk := range skills {
		for _, key := range []string{"securityRequirements", "security"} {
			if _, ok := sk[key]; ok {
				delete(sk, key)
				changed = true
			}
		}
	}
	if changed {
		card["skills"], _ = json.Marshal(skills)
	}
}

// KeyedCardSigner is a CardSigner that names the key it signs with now
// (listings/cardsig.Signer).
type KeyedCardSigner interface {
	CardSigner
	ActiveKeyID(ctx context.Context) (string, error)
}

// SignedCards is a CardSigner that signs each proxied card once per key:
// a card fetch is an unauthenticated GET, and an ECDSA signature on every
// one is CPU anyone can make the meter spend. A proxied card is the same
// bytes for one listing, card version and reader form (ProxiedCard), so
// its signed form is kept under the digest of those bytes and the kid
// that signed it; a new card version, or a rotation of the keys, signs
// anew. At most MaxBytes of signed cards are kept (default 16 MiB: a
// card is at most 64 KiB); when full, the cards of keys no longer signing
// go first, then all.
type SignedCards struct {
	Signer   KeyedCardSigner
	MaxBytes int

	mu    sync.Mutex
	cards map[signedCardKey][]byte
	bytes int
}

type signedCardKey struct {
	card [sha256.Size]byte
	kid  string
}

var _ CardSigner = (*SignedCards)(nil)

// SignCard implements CardSigner. The bytes returned are shared: callers
// only read them.
func (s *SignedCards) SignCard(ctx context.Context, card []byte) ([]byte, error) {
	kid, err := s.Signer.ActiveKeyID(ctx)
	if err != nil {
		return nil, err
	}
	k := signedCardKey{card: sha256.Sum256(card), kid: kid}
	s.mu.Lock()
	signed, ok := s.cards[k]
	s.mu.Unlock()
	if ok {
		return signed, nil
	}
	if signed, err = s.Signer.SignCard(ctx, card); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	limit := s.MaxBytes
	if limit <= 0 {
		limit = 16 << 20
	}
	if s.cards == nil {
		s.cards = map[signedCardKey][]byte{}
	}
	if s.bytes+len(signed) > limit {
		for old, b := range s.cards {
			if old.kid != kid {
				delete(s.cards, old)
				s.bytes -= len(b)
			}
		}
		if s.bytes+len(signed) > limit {
			clear(s.cards)
			s.bytes = 0
		}
	}
	if prev, ok := s.cards[k]; ok {
		s.bytes -= len(prev) // signed meanwhile by another GET
	}
	s.bytes += len(signed)
	// Capped at its length: an append by one caller never writes where
	// another reads.
	signed = signed[:len(signed):len(signed)]
	s.cards[k] = signed
	return signed, nil
}

// JWKS implements CardSigner.
func (s *SignedCards) JWKS(ctx context.Context) ([]byte, time.Duration, error) {
	return s.Signer.JWKS(ctx)
}
