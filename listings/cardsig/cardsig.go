// Package cardsig signs and verifies Agent Cards as A2A 1.0 §8.4 defines
// it: a JWS (RFC 7515) whose payload is the card without its signatures,
// its default-valued members removed (proto presence, §8.4.1) and put in
// the canonical form of RFC 8785 (Canonical); the card carries each
// signature as {protected, signature[, header]}.
package cardsig

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/agentcard/protoschema"
)

// Algorithms are the signature algorithms a card's signature may use.
var Algorithms = []jose.SignatureAlgorithm{jose.ES256, jose.ES384, jose.RS256, jose.PS256, jose.EdDSA}

// MaxSignatures is how many of a card's signatures are tried.
const MaxSignatures = 5

// Signature is one entry of a card's signatures.
type Signature struct {
	Protected string         `json:"protected"`
	Signature string         `json:"signature"`
	Header    map[string]any `json:"header,omitempty"`
}

// Payloads returns what a signature of card may cover: the card without
// signatures, default values removed for a 1.0 card (§8.4.1), in RFC 8785
// form; and, where that differs, the same without removing defaults, as
// signers that skip §8.4.1's first rule make it (a 0.3 card has only
// this one).
func Payloads(card []byte) ([][]byte, error) {
	d := json.NewDecoder(bytes.NewReader(card))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("the card is not JSON: %w", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("the card is not a JSON object")
	}
	delete(obj, "signatures")
	plain, err := CanonicalValue(obj)
	if err != nil {
		return nil, err
	}
	if _, v10 := obj["supportedInterfaces"]; !v10 {
		return [][]byte{plain}, nil
	}
	schema, err := protoschema.A2A()
	if err != nil {
		return nil, err
	}
	stripped, err := schema.StripDefaults("AgentCard", obj)
	if err != nil {
		return nil, err
	}
	canon, err := CanonicalValue(stripped)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(canon, plain) {
		return [][]byte{canon}, nil
	}
	return [][]byte{canon, plain}, nil
}

// Verifier checks cards' signatures; it implements listings.CardVerifier.
type Verifier struct {
	// Fetch reads a key set a signature names by its jku, under the same
	// SSRF guard, size cap and timeout as cards (listings/httpfetch).
	Fetch listings.CardFetcher
}

var _ listings.CardVerifier = (*Verifier)(nil)

// CheckKeys implements listings.CardVerifier.
func (v *Verifier) CheckKeys(keys []byte) error {
	set, err := parseKeySet(keys)
	if err != nil {
		return err
	}
	if len(set.Keys) == 0 {
		return errors.New("it has no keys")
	}
	for _, k := range set.Keys {
		if !k.IsPublic() {
			return fmt.Errorf("key %q is not a public key", k.KeyID)
		}
	}
	return nil
}

func parseKeySet(b []byte) (*jose.JSONWebKeySet, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, err
	}
	return &set, nil
}

// VerifyCard implements listings.CardVerifier: the card is verified when
// one of its first MaxSignatures signatures verifies with a key of keys
// (when the seller registered keys: only those) or of the key set its jku
// names, when that key set is on the card's own host (CardHosts).
func (v *Verifier) VerifyCard(ctx context.Context, card, keys []byte, cardURL string) listings.CardSignature {
	var top struct {
		Signatures json.RawMessage `json:"signatures"`
	}
	if err := json.Unmarshal(card, &top); err != nil {
		return failed("", "", "the card is not JSON")
	}
	t := bytes.TrimSpace(top.Signatures)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) || bytes.Equal(t, []byte("[]")) {
		return listings.CardSignature{Status: listings.SignatureNone}
	}
	var sigs []Signature
	if err := json.Unmarshal(t, &sigs); err != nil {
		return failed("", "", "signatures must be an array of {protected, signature}")
	}
	payloads, err := Payloads(card)
	if err != nil {
		return failed("", "", err.Error())
	}
	var registered *jose.JSONWebKeySet
	if len(keys) > 0 {
		if registered, err = parseKeySet(keys); err != nil {
			return failed("", "", "the registered keys are not a JWKS")
		}
	}
	vc := verification{payloads: payloads, registered: registered, hosts: CardHosts(card, cardURL), fetched: map[string]*jose.JSONWebKeySet{}}
	last := failed("", "", "no signature")
	for i, s := range sigs {
		if i == MaxSignatures {
			break
		}
		last = v.verifyOne(ctx, i, s, &vc)
		if last.Status == listings.SignatureVerified {
			return last
		}
	}
	return last
}

// verification is what the signatures of one card are checked with.
type verification struct {
	payloads   [][]byte
	registered *jose.JSONWebKeySet // the seller's keys; nil: each signature's jku
	hosts      []string            // where a jku's key set may be (CardHosts)
	fetched    map[string]*jose.JSONWebKeySet
}

// CardHosts are the hosts (host:port, the scheme's default port
// written out) that serve card: its listing's card URL and the URLs of
// the interfaces the card declares. A key set a signature's jku names
// vouches for the card only on one of them: anyone can sign a copy of a
// card with a key set of their own, and a badge naming their host next to
// the seller's name would read as the seller's signature. A seller whose
// keys live elsewhere registers them with the listing (card_keys).
func CardHosts(card []byte, cardURL string) []string {
	var c struct {
		URL                 string `json:"url"`
		SupportedInterfaces []struct {
			URL string `json:"url"`
		} `json:"supportedInterfaces"`
		AdditionalInterfaces []struct {
			URL string `json:"url"`
		} `json:"additionalInterfaces"`
	}
	_ = json.Unmarshal(card, &c)
	urls := []string{cardURL, c.URL}
	for _, i := range c.SupportedInterfaces {
		urls = append(urls, i.URL)
	}
	for _, i := range c.AdditionalInterfaces {
		urls = append(urls, i.URL)
	}
	var hosts []string
	for _, raw := range urls {
		if h := hostOf(raw); h != "" && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// hostOf is raw's host:port in lower case, the default port of http(s)
// written out; "" when raw is not an http(s) URL with a host.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	switch {
	case port != "":
	case u.Scheme == "https":
		port = "443"
	case u.Scheme == "http":
		port = "80"
	default:
		return ""
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

func (v *Verifier) verifyOne(ctx context.Context, i int, s Signature, vc *verification) listings.CardSignature {
	var hdr struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
		JKU string `json:"jku"`
	}
	ph, err := base64.RawURLEncoding.DecodeString(s.Protected)
	if err != nil || json.Unmarshal(ph, &hdr) != nil {
		return failed("", "", fmt.Sprintf("signature %d: its protected header is not base64url JSON", i+1))
	}
	at := func(detail string) listings.CardSignature {
		return failed(hdr.Kid, hdr.JKU, fmt.Sprintf("signature %d (kid %q): %s", i+1, hdr.Kid, detail))
	}
	set, signer := vc.registered, "the seller's registered keys"
	if set == nil {
		if hdr.JKU == "" {
			return at("it names no key set (jku) and the seller registered no keys")
		}
		u, err := url.Parse(hdr.JKU)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return at("its jku is not an http(s) URL")
		}
		if !slices.Contains(vc.hosts, hostOf(hdr.JKU)) {
			return at(fmt.Sprintf("its key set (jku) is on %s, which does not serve this card (%s): a key set elsewhere vouches only when the seller registers it with the listing (card_keys)",
				u.Host, strings.Join(vc.hosts, ", ")))
		}
		signer = u.Host
		if set = vc.fetched[hdr.JKU]; set == nil {
			f, err := v.Fetch.FetchCard(ctx, hdr.JKU, "")
			if err != nil {
				return at("the key set at its jku could not be read: " + errText(err))
			}
			if set, err = parseKeySet(f.Body); err != nil {
				return at("the key set at its jku is not a JWKS")
			}
			vc.fetched[hdr.JKU] = set
		}
	}
	keys := set.Key(hdr.Kid)
	if hdr.Kid == "" || len(keys) == 0 {
		return at("no key of that kid in " + signer)
	}
	for _, payload := range vc.payloads {
		compact := s.Protected + "." + base64.RawURLEncoding.EncodeToString(payload) + "." + s.Signature
		obj, err := jose.ParseSigned(compact, Algorithms)
		if err != nil {
			return at("not a JWS of an accepted algorithm (ES256, ES384, RS256, PS256, EdDSA)")
		}
		for _, k := range keys {
			if !k.IsPublic() {
				continue
			}
			if _, err := obj.Verify(k); err == nil {
				return listings.CardSignature{Status: listings.SignatureVerified, KeyID: hdr.Kid, JKU: hdr.JKU, Signer: signer}
			}
		}
	}
	return at("it does not verify over the card's canonical form")
}

func failed(kid, jku, detail string) listings.CardSignature {
	return listings.CardSignature{Status: listings.SignatureFailed, KeyID: kid, JKU: jku, Detail: detail}
}

func errText(err error) string { return err.Error() }

// Keys sign JWSs and publish their public half (a2aproxy/pushsign.Keys
// with the card keys' store).
type Keys interface {
	SignJWS(ctx context.Context, payload []byte, jku string) (protected, signature string, err error)
	JWKS(ctx context.Context) ([]byte, time.Duration, error)
	// ActiveKeyID is the kid SignJWS signs with now.
	ActiveKeyID(ctx context.Context) (string, error)
}

// Signer signs cards with Keys; each signature names JKU, where Keys'
// JWKS is served.
type Signer struct {
	Keys Keys
	JKU  string
}

// SignCard returns card with its signatures replaced by one of its own:
// over the card without signatures, defaults removed, in RFC 8785 form.
func (s Signer) SignCard(ctx context.Context, card []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(card, &m); err != nil {
		return nil, err
	}
	delete(m, "signatures")
	bare, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	payloads, err := Payloads(bare)
	if err != nil {
		return nil, err
	}
	protected, sig, err := s.Keys.SignJWS(ctx, payloads[0], s.JKU)
	if err != nil {
		return nil, err
	}
	m["signatures"], _ = json.Marshal([]Signature{{Protected: protected, Signature: sig}})
	return json.Marshal(m)
}

// JWKS is the key set that verifies SignCard's signatures, and how long
// it may be cached.
func (s Signer) JWKS(ctx context.Context) ([]byte, time.Duration, error) { return s.Keys.JWKS(ctx) }

// ActiveKeyID is the kid SignCard signs with now.
func (s Signer) ActiveKeyID(ctx context.Context) (string, error) { return s.Keys.ActiveKeyID(ctx) }
