package aesgcm_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket/listings/aesgcm"
)

// testKey is 32 distinct bytes, so every encoding of it is distinct too.
var testKey = func() []byte {
	k := make([]byte, aesgcm.KeySize)
	for i := range k {
		k[i] = byte(i*7 + 250) // wraps, giving bytes that need '+', '/', '-', '_' in base64
	}
	return k
}()

func mustNew(t *testing.T, key []byte) *aesgcm.Sealer {
	t.Helper()
	s, err := aesgcm.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRoundTrip(t *testing.T) {
	s := mustNew(t, testKey)
	for _, plain := range [][]byte{
		[]byte(`{"header":"Authorization","value":"Bearer s3cret"}`),
		{},
		bytes.Repeat([]byte{0, 1, 2, 255}, 4096),
	} {
		sealed, err := s.Seal(plain, ctxID)
		if err != nil {
			t.Fatal(err)
		}
		if len(plain) > 4 && bytes.Contains(sealed, plain[:len(plain)/2]) {
			t.Errorf("sealed value contains the plaintext")
		}
		got, err := s.Open(sealed, ctxID)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if !bytes.Equal(got, plain) {
			t.Errorf("Open = %q, want %q", got, plain)
		}
	}
}

func TestSealIsRandomized(t *testing.T) {
	s := mustNew(t, testKey)
	a, _ := s.Seal([]byte("same"), ctxID)
	b, _ := s.Seal([]byte("same"), ctxID)
	if bytes.Equal(a, b) {
		t.Error("sealing the same plaintext twice gave the same bytes (nonce reuse)")
	}
}

func TestTamperingFails(t *testing.T) {
	s := mustNew(t, testKey)
	sealed, err := s.Seal([]byte("Bearer s3cret"), ctxID)
	if err != nil {
		t.Fatal(err)
	}
	// Every single flipped bit, whether in the version, the nonce, the
	// ciphertext or the tag, must be detected.
	for i := range sealed {
		bad := bytes.Clone(sealed)
		bad[i] ^= 0x01
		if got, err := s.Open(bad, ctxID); err == nil {
			t.Errorf("byte %d changed: Open = %q, want an error", i, got)
		}
	}
	cut := []struct {
		name   string
		sealed []byte
	}{
		{"empty", nil},
		{"version only", sealed[:1]},
		{"no tag", sealed[:len(sealed)-16]},
		{"last byte missing", sealed[:len(sealed)-1]},
		{"extra byte", append(bytes.Clone(sealed), 0)},
	}
	for _, tc := range cut {
		if _, err := s.Open(tc.sealed, ctxID); err == nil {
			t.Errorf("%s: Open succeeded, want an error", tc.name)
		}
	}
}

func TestWrongKeyFails(t *testing.T) {
	sealed, err := mustNew(t, testKey).Seal([]byte("Bearer s3cret"), ctxID)
	if err != nil {
		t.Fatal(err)
	}
	other := bytes.Clone(testKey)
	other[0] ^= 0x80
	if got, err := mustNew(t, other).Open(sealed, ctxID); err == nil {
		t.Errorf("Open with another key = %q, want an error", got)
	}
}

func TestNewRejectsKeySizes(t *testing.T) {
	for _, n := range []int{0, 16, 24, 31, 33, 64} {
		if _, err := aesgcm.New(make([]byte, n)); err == nil {
			t.Errorf("New with a %d-byte key succeeded, want an error", n)
		}
	}
}

func TestParseKey(t *testing.T) {
	cases := []struct {
		name string
		in   string
		ok   bool
	}{
		{"standard base64", base64.StdEncoding.EncodeToString(testKey), true},
		{"standard base64 without padding", base64.RawStdEncoding.EncodeToString(testKey), true},
		{"URL-safe base64", base64.URLEncoding.EncodeToString(testKey), true},
		{"URL-safe base64 without padding", base64.RawURLEncoding.EncodeToString(testKey), true},
		{"hex", hex.EncodeToString(testKey), true},
		{"hex in capitals", strings.ToUpper(hex.EncodeToString(testKey)), true},
		{"base64 with a trailing newline, as in a file", base64.StdEncoding.EncodeToString(testKey) + "\n", true},
		{"empty", "", false},
		{"16 bytes of base64", base64.StdEncoding.EncodeToString(testKey[:16]), false},
		{"31 bytes of base64", base64.StdEncoding.EncodeToString(testKey[:31]), false},
		{"33 bytes of base64", base64.StdEncoding.EncodeToString(append(bytes.Clone(testKey), 1)), false},
		{"31 bytes of hex", hex.EncodeToString(testKey[:31]), false},
		{"33 bytes of hex", hex.EncodeToString(append(bytes.Clone(testKey), 1)), false},
		{"a passphrase", "correct horse battery staple, not a key!", false},
		{"base64 with a bad character", "!" + base64.StdEncoding.EncodeToString(testKey)[1:], false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := aesgcm.ParseKey(tc.in)
			if !tc.ok {
				if err == nil {
					t.Errorf("ParseKey(%q) = %x, want an error", tc.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseKey(%q): %v", tc.in, err)
			}
			if !bytes.Equal(got, testKey) {
				t.Errorf("ParseKey(%q) = %x, want %x", tc.in, got, testKey)
			}
		})
	}
}

func TestLoadOrCreateKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "secret.key")

	first, err := aesgcm.LoadOrCreateKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != aesgcm.KeySize {
		t.Fatalf("key is %d bytes, want %d", len(first), aesgcm.KeySize)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("key file mode = %o, want 600", got)
	}
	written, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if parsed, err := aesgcm.ParseKey(string(written)); err != nil || !bytes.Equal(parsed, first) {
		t.Errorf("key file holds %q, want the returned key in a form ParseKey reads", written)
	}

	second, err := aesgcm.LoadOrCreateKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Error("second call returned another key, want the one in the file")
	}

	// A value sealed with the created key opens with the reloaded one.
	sealed, _ := mustNew(t, first).Seal([]byte("x"), ctxID)
	if _, err := mustNew(t, second).Open(sealed, ctxID); err != nil {
		t.Errorf("Open with the reloaded key: %v", err)
	}
}

func TestLoadOrCreateKeyFileKeepsAGivenKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(path, []byte(hex.EncodeToString(testKey)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := aesgcm.LoadOrCreateKeyFile(path)
	if err != nil || !bytes.Equal(got, testKey) {
		t.Errorf("LoadOrCreateKeyFile = %x, %v; want the key in the file", got, err)
	}
}

func TestLoadOrCreateKeyFileRefusesGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(path, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := aesgcm.LoadOrCreateKeyFile(path); err == nil {
		t.Error("LoadOrCreateKeyFile accepted a file that holds no key")
	}
	// The bad file is reported, never replaced by a new key.
	if b, _ := os.ReadFile(path); string(b) != "not a key\n" {
		t.Errorf("key file rewritten to %q", b)
	}
}

var ctxID = []byte("lst_test")

func TestOtherContextFails(t *testing.T) {
	s := mustNew(t, testKey)
	sealed, err := s.Seal([]byte("Bearer s3cret"), []byte("lst_a"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Open(sealed, []byte("lst_b")); err == nil {
		t.Fatalf("opened under another listing's context: %q", got)
	}
}
