package stored

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"

	"pacer/scheduler"
)

// KeySize is the length of the credentials key: AES-256.
const KeySize = 32

// sealVersion prefixes every sealed blob, so the format can change later.
const sealVersion byte = 1

// NewAEAD returns AES-256-GCM under key, which must be KeySize bytes.
func NewAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("credentials key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("credentials key: %w", err)
	}
	return cipher.NewGCM(block)
}

// SealCredentials encrypts c with a random nonce; the scope name is the
// additional data, so the blob opens only for that scope. The result is
// version byte | nonce | ciphertext and tag.
func SealCredentials(aead cipher.AEAD, scope string, c scheduler.Credentials) ([]byte, error) {
	plain, err := encodeCredentials(c)
	if err != nil {
		return nil, errors.New("seal credentials: cannot encode")
	}
	defer clear(plain)
	return seal(aead, scope, plain)
}

// seal encrypts plain with a random nonce and data as the additional
// data: version byte | nonce | ciphertext and tag.
func seal(aead cipher.AEAD, data string, plain []byte) ([]byte, error) {
	out := make([]byte, 1+aead.NonceSize(), 1+aead.NonceSize()+len(plain)+aead.Overhead())
	out[0] = sealVersion
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return aead.Seal(out, out[1:], plain, []byte(data)), nil
}

// CredentialsError reports stored credentials that do not open: the key is
// not the one they were sealed with, or the data is corrupted. Replacing
// the scope (PutScope) seals new credentials with the current key. It never
// carries secret values.
type CredentialsError struct {
	Scope string
	// Problem says what is wrong, in words.
	Problem string
}

// Error implements error.
func (e *CredentialsError) Error() string {
	return "open credentials of scope " + e.Scope + ": " + e.Problem
}

// OpenCredentials decrypts a blob sealed for scope. Its errors are
// *CredentialsError and never carry the plaintext.
func OpenCredentials(aead cipher.AEAD, scope string, blob []byte) (scheduler.Credentials, error) {
	plain, err := OpenSealed(aead, scope, blob)
	if err != nil {
		return scheduler.Credentials{}, err
	}
	defer clear(plain)
	c, err := decodeCredentials(plain)
	if err != nil {
		return scheduler.Credentials{}, &CredentialsError{scope, "malformed"}
	}
	return c, nil
}

// OpenSealed returns the plaintext of a blob sealed for scope (see
// SealCredentials); the caller clears it. Its errors are
// *CredentialsError.
func OpenSealed(aead cipher.AEAD, scope string, blob []byte) ([]byte, error) {
	n := aead.NonceSize()
	if len(blob) < 1+n+aead.Overhead() || blob[0] != sealVersion {
		return nil, &CredentialsError{scope, "unknown format"}
	}
	plain, err := aead.Open(nil, blob[1:1+n], blob[1+n:], []byte(scope))
	if err != nil {
		return nil, &CredentialsError{scope, "wrong key or corrupted data (put the scope's credentials again to reseal them)"}
	}
	return plain, nil
}
