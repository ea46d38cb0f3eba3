// Package pushverify is the example of docs/long-tasks.md: how a buyer's
// webhook checks that a push notification comes from the AgentMarket
// meter, with nothing but the marketplace's public keys. It needs only
// the standard library and a maintained JOSE library
// (github.com/go-jose/go-jose/v4); copy it into your webhook.
//
// Every delivery carries, in the AgentMarket-Signature header, a JWS
// (RFC 7515) in compact form with a detached payload,
// "<protected header>..<signature>", made over the exact bytes of the
// request body. Verifying it:
//
//  1. read the body as it arrived (before any JSON decoding);
//  2. split the header at its two dots; the middle part is empty;
//  3. decode the protected header (base64url, no padding): a JSON object
//     with "alg" ("ES256"), "kid", "iat", "aud" (the buyer org the
//     delivery is for), and the agentmarket-* names of the delivery, task,
//     listing, push config and target (the hash of the URL it was sent to);
//  4. find the key of that "kid" in the JWKS published at
//     <marketplace>/api/v1/push/jwks (fetched again when the kid is not in
//     your copy: keys rotate, and a new one is published an hour before it
//     signs);
//  5. check the ES256 signature over the ASCII bytes
//     "<protected header>.<base64url of the body>";
//  6. check it is for you: "aud" is your org's id, "agentmarket-target"
//     is the hash of this webhook's URL and "agentmarket-config" one of
//     your configs (a genuine delivery another org asked for, with the
//     same config id and your URL, is signed for that org, not for you);
//  7. check "iat" is recent (each attempt is signed anew; an old one is a
//     replay), that this very signature was not received before (a copy
//     of a request), and use the delivery id to acknowledge, without
//     handling it again, a delivery you handled already (Seen does both).
package pushverify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// SignatureHeader is the HTTP header a delivery's signature is in.
const SignatureHeader = "AgentMarket-Signature"

// Delivery is what a verified signature says about the request.
type Delivery struct {
	KeyID      string    // the key that signed
	IssuedAt   time.Time // when this attempt was signed
	DeliveryID string    // the same on every attempt of one notification
	TaskID     string
	ListingID  string
	ConfigID   string // your push notification config's id
	Org        string // "aud": the org it is for, yours
	// Target is "agentmarket-target": the base64url SHA-256 of the URL
	// it was sent to, this webhook's.
	Target string
	// Received is when the meter received the notification
	// ("agentmarket-received"; zero when absent). Covers
	// ("agentmarket-covers") is how many earlier status updates of the
	// same task and config, received before it, it stands for: under a
	// flood the meter sends the latest state, not every step to it
	// (artifacts and terminal states always go).
	Received time.Time
	Covers   int
}

// Errors of Verify.
var (
	ErrMalformed  = errors.New("the signature is not a detached compact ES256 JWS")
	ErrUnknownKey = errors.New("the signature's key is not in the marketplace's JWKS")
	ErrBadSig     = errors.New("the signature does not match the body")
	ErrStale      = errors.New("the signature is too old (or from the future)")
	// ErrNotForYou: a genuine delivery, signed for another org, another
	// webhook URL or a config that is not yours.
	ErrNotForYou = errors.New("the delivery is not for this webhook")
)

// Verifier checks deliveries against the JWKS of one marketplace.
type Verifier struct {
	// JWKSURL is the marketplace's key set: https://<marketplace>/api/v1/push/jwks.
	JWKSURL string
	// Org is your org's id (org_...): a delivery's "aud" must be it.
	Org string
	// URL is this webhook's URL, exactly as your push configs (or alert
	// settings) name it: a delivery's "agentmarket-target" must be its
	// hash. One Verifier per webhook URL.
	URL string
	// Config reports whether a push config id is yours at this webhook:
	// the ids you set (a 0.3 config without one: its task's id), and
	// "alerts:<org>" for spend alerts. ConfigIDs makes one of a list.
	Config func(ctx context.Context, configID string) bool
	// Client fetches it; nil: http.DefaultClient.
	Client *http.Client
	// MaxSkew is how far from now a signature's iat may be; default 5
	// minutes, negative: not checked.
	MaxSkew time.Duration
	// Refresh is how long a fetched key set is used before it is fetched
	// again; default 5 minutes (what the marketplace's Cache-Control says).
	Refresh time.Duration
	// Now tells the time; nil: time.Now.
	Now func() time.Time
	// Seen, when set, refuses an attempt received before (ErrReplayed),
	// and lets Handler acknowledge a delivery handled before without
	// handling it again. Without it, a copy of a request is accepted
	// while its signature is fresh (MaxSkew).
	Seen *Seen

	mu      sync.Mutex
	set     *jose.JSONWebKeySet
	fetched time.Time
}

// ConfigIDs is a Verifier.Config that accepts the ids given.
func ConfigIDs(ids ...string) func(context.Context, string) bool {
	return func(_ context.Context, id string) bool {
		for _, x := range ids {
			if id == x {
				return true
			}
		}
		return false
	}
}

// TargetHash is what "agentmarket-target" says for a webhook URL: the
// base64url (no padding) SHA-256 of its bytes, as they are.
func TargetHash(url string) string {
	sum := sha256.Sum256([]byte(url))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// Verify checks the signature of a delivery against its body, byte for
// byte as received, and that it is for this webhook (Org, URL, Config).
func (v *Verifier) Verify(ctx context.Context, signature string, body []byte) (*Delivery, error) {
	if v.Org == "" || v.URL == "" || v.Config == nil {
		// Without them a genuine delivery for anyone would pass.
		return nil, errors.New("pushverify: the Verifier needs Org, URL and Config")
	}
	if body == nil {
		body = []byte{}
	}
	obj, err := jose.ParseDetached(signature, body, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil || len(obj.Signatures) != 1 {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	h := obj.Signatures[0].Protected
	key, err := v.key(ctx, h.KeyID)
	if err != nil {
		return nil, err
	}
	if err := obj.DetachedVerify(body, key); err != nil {
		return nil, ErrBadSig
	}
	// Only now, signed, is the header worth reading.
	d := &Delivery{KeyID: h.KeyID}
	str := func(name string) string { s, _ := h.ExtraHeaders[jose.HeaderKey(name)].(string); return s }
	d.DeliveryID, d.TaskID, d.ListingID, d.ConfigID = str("agentmarket-delivery"), str("agentmarket-task"), str("agentmarket-listing"), str("agentmarket-config")
	d.Org, d.Target = str("aud"), str("agentmarket-target")
	iat, ok := h.ExtraHeaders["iat"].(float64)
	// agentmarket-task is present always, empty in a delivery about no
	// task (a spend alert).
	_, hasTask := h.ExtraHeaders["agentmarket-task"].(string)
	if !ok || d.DeliveryID == "" || !hasTask {
		return nil, fmt.Errorf("%w: iat, agentmarket-delivery or agentmarket-task missing", ErrMalformed)
	}
	d.IssuedAt = time.Unix(int64(iat), 0)
	if rec, ok := h.ExtraHeaders["agentmarket-received"].(float64); ok {
		d.Received = time.Unix(int64(rec), 0)
	}
	if n, ok := h.ExtraHeaders["agentmarket-covers"].(float64); ok {
		d.Covers = int(n)
	}
	switch {
	case d.Org != v.Org:
		return nil, fmt.Errorf("%w: signed for org %q", ErrNotForYou, d.Org)
	case d.Target != TargetHash(v.URL):
		return nil, fmt.Errorf("%w: signed for another URL", ErrNotForYou)
	case !v.Config(ctx, d.ConfigID):
		return nil, fmt.Errorf("%w: config %q is not yours", ErrNotForYou, d.ConfigID)
	}
	skew := v.MaxSkew
	if skew == 0 {
		skew = 5 * time.Minute
	}
	if age := v.now().Sub(d.IssuedAt); skew > 0 && (age > skew || age < -skew) {
		return nil, fmt.Errorf("%w: signed at %s", ErrStale, d.IssuedAt.UTC().Format(time.RFC3339))
	}
	if v.Seen != nil {
		staleAt := d.IssuedAt.Add(max(skew, 0) + time.Second)
		if skew < 0 {
			staleAt = v.now().Add(24 * time.Hour) // no freshness: remembered a day
		}
		if !v.Seen.attempt(signature, staleAt, v.now()) {
			return nil, ErrReplayed
		}
	}
	return d, nil
}

// key returns the key of kid from the JWKS, fetching the set when it is
// older than Refresh, or when it lacks kid (a rotation) and was fetched
// more than 10 seconds ago.
func (v *Verifier) key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	refresh := v.Refresh
	if refresh <= 0 {
		refresh = 5 * time.Minute
	}
	find := func() *jose.JSONWebKey {
		if v.set == nil || kid == "" {
			return nil
		}
		if ks := v.set.Key(kid); len(ks) > 0 && ks[0].Use != "enc" && ks[0].Valid() {
			return &ks[0]
		}
		return nil
	}
	age := v.now().Sub(v.fetched)
	if k := find(); k != nil && age < refresh {
		return k, nil
	}
	if v.set == nil || age >= refresh || age >= 10*time.Second {
		if err := v.fetch(ctx); err != nil {
			if k := find(); k != nil {
				return k, nil // the copy we have still knows it
			}
			return nil, err
		}
	}
	if k := find(); k != nil {
		return k, nil
	}
	return nil, fmt.Errorf("%w: kid %q", ErrUnknownKey, kid)
}

func (v *Verifier) fetch(ctx context.Context) error {
	client := v.Client
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.JWKSURL, nil)
	if err != nil {
		return err
	}
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("fetch the JWKS: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("fetch the JWKS: %s", res.Status)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&set); err != nil {
		return fmt.Errorf("read the JWKS: %w", err)
	}
	v.set, v.fetched = &set, v.now()
	return nil
}

type ctxKey struct{}

// FromContext returns the delivery Handler verified.
func FromContext(ctx context.Context) (*Delivery, bool) {
	d, ok := ctx.Value(ctxKey{}).(*Delivery)
	return d, ok
}

// Handler verifies every request before next sees it: a request whose
// signature does not verify, is not for this webhook, is stale or (with
// Seen) a replay, or whose X-AgentMarket-Delivery-Id is not the signed
// one, is answered 401 (the meter retries it, signed anew; a forgery, a
// copy or another org's delivery stops here). With Seen, a delivery next
// handled before (answered 2xx) is answered 200 without reaching next.
// next gets the body as it arrived, and the verified Delivery in the
// request's context (FromContext).
func (v *Verifier) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<20))
		if err != nil {
			http.Error(w, "cannot read the body", http.StatusBadRequest)
			return
		}
		d, err := v.Verify(r.Context(), r.Header.Get(SignatureHeader), body)
		if err == nil && r.Header.Get("X-AgentMarket-Delivery-Id") != d.DeliveryID {
			err = errors.New("X-AgentMarket-Delivery-Id is not the signed delivery id")
		}
		if err != nil {
			http.Error(w, "signature refused: "+err.Error(), http.StatusUnauthorized)
			return
		}
		if v.Seen != nil && v.Seen.Handled(d.DeliveryID, v.now()) {
			// A retry of a delivery handled already (the meter missed the
			// answer): acknowledged, not handled twice.
			w.WriteHeader(http.StatusOK)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), ctxKey{}, d)))
		if v.Seen != nil && sw.status >= 200 && sw.status < 300 {
			v.Seen.MarkHandled(d.DeliveryID, v.now())
		}
	})
}

// statusWriter notes the status the handler answers.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}
