// Package aesgcm seals secrets at rest with AES-256-GCM. Each sealed value
// is a version byte, a random 12-byte nonce and the ciphertext with its tag;
// the version and the caller's context (a listing id) are authenticated as
// additional data, so a stolen database row reveals nothing without the
// key, and a value moved to another listing or tampered with fails to open.
package aesgcm

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentmarket/agentmarket/listings"
)

const version byte = 1

// KeySize is the key length in bytes (AES-256).
const KeySize = 32

// Sealer implements listings.Sealer.
type Sealer struct {
	aead cipher.AEAD
}

var _ listings.Sealer = (*Sealer)(nil)

// New returns a sealer for a 32-byte key.
func New(key []byte) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("aesgcm: key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// ParseKey reads a key given as standard or URL-safe base64 (or 64 hex
// digits), as AGENTMARKET_SECRET_KEY carries it.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == KeySize {
			return b, nil
		}
	}
	if b, err := hex.DecodeString(s); err == nil && len(b) == KeySize {
		return b, nil
	}
	return nil, fmt.Errorf("must be %d random bytes in base64 (e.g. `openssl rand -base64 32`)", KeySize)
}

// LoadOrCreateKeyFile reads the key in path, or writes a new random one
// there (mode 0600) when the file does not exist: the embedded default's
// generated key.
func LoadOrCreateKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return ParseKey(string(b))
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	// Write a whole file aside and link it into place: concurrent first
	// starts then agree on one key and never read a half-written file.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".secret-key-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(base64.StdEncoding.EncodeToString(key) + "\n"); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return LoadOrCreateKeyFile(path)
		}
		return nil, err
	}
	return key, nil
}

// Seal encrypts plaintext, bound to context.
func (s *Sealer) Seal(plaintext, context []byte) ([]byte, error) {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out := make([]byte, 0, 1+len(nonce)+len(plaintext)+s.aead.Overhead())
	out = append(out, version)
	out = append(out, nonce...)
	return s.aead.Seal(out, nonce, plaintext, aad(context)), nil
}

func aad(context []byte) []byte {
	return append([]byte{version}, context...)
}

// Open decrypts what Seal produced with the same context, failing on any
// tampering, another context or the wrong key.
func (s *Sealer) Open(sealed, context []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < 1+n+s.aead.Overhead() || sealed[0] != version {
		return nil, errors.New("aesgcm: not a sealed value")
	}
	return s.aead.Open(nil, sealed[1:1+n], sealed[1+n:], aad(context))
}
