package db

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strings"

	"pacer/internal/stored"
	"pacer/scheduler"
)

// KeySize is the length of the credentials key: AES-256.
const KeySize = stored.KeySize

// newAEAD returns AES-256-GCM under key.
func newAEAD(key []byte) (cipher.AEAD, error) { return stored.NewAEAD(key) }

// sealCredentials encrypts c for scope (stored.SealCredentials).
func (db *DB) sealCredentials(scope string, c scheduler.Credentials) ([]byte, error) {
	return stored.SealCredentials(db.aead, scope, c)
}

// CredentialsError reports stored credentials that do not open
// (stored.CredentialsError).
type CredentialsError = stored.CredentialsError

// openCredentials decrypts a blob sealed for scope. Its errors are
// *CredentialsError and never carry the plaintext.
func (db *DB) openCredentials(scope string, blob []byte) (scheduler.Credentials, error) {
	if db.credentialsOpening != nil {
		db.credentialsOpening(scope)
	}
	return stored.OpenCredentials(db.aead, scope, blob)
}

// openSealed returns the plaintext of a blob sealed for scope; the caller
// clears it. Its errors are *CredentialsError.
func (db *DB) openSealed(scope string, blob []byte) ([]byte, error) {
	return stored.OpenSealed(db.aead, scope, blob)
}

// ParseKey decodes a base64 credentials key (standard or URL alphabet,
// padded or not; surrounding space ignored). It must decode to 32 bytes.
// Errors never echo the input.
func ParseKey(b64 string) ([]byte, error) {
	s := strings.TrimSpace(b64)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		key, err := enc.DecodeString(s)
		if err != nil {
			continue
		}
		if len(key) != KeySize {
			return nil, fmt.Errorf("credentials key must decode to %d bytes, got %d (generate one with: head -c 32 /dev/urandom | base64)", KeySize, len(key))
		}
		return key, nil
	}
	return nil, errors.New("credentials key is not valid base64 (generate one with: head -c 32 /dev/urandom | base64)")
}

// LoadOrCreateKeyFile reads the base64 credentials key in the file at path.
// When the file does not exist it creates it, with mode 0600, holding 32
// random bytes in base64, and reports created. It refuses a key file that
// its group or others may read or write (on systems with Unix permissions):
// fix it with chmod 600.
func LoadOrCreateKeyFile(path string) (key []byte, created bool, err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		key = make([]byte, KeySize)
		if _, err := rand.Read(key); err != nil {
			f.Close()
			os.Remove(path)
			return nil, false, fmt.Errorf("create key file %s: %w", path, err)
		}
		_, werr := f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
		if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
			os.Remove(path)
			return nil, false, fmt.Errorf("create key file %s: %w", path, err)
		}
		return key, true, nil
	case !errors.Is(err, fs.ErrExist):
		return nil, false, fmt.Errorf("create key file %s: %w", path, err)
	}
	key, err = ReadKeyFile(path)
	return key, false, err
}

// ReadKeyFile reads the base64 credentials key in the existing file at
// path, refusing one that its group or others may read or write (on
// systems with Unix permissions). It never creates the file: on
// PostgreSQL every process must read the same key.
func ReadKeyFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read key file %s: %w", path, err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("key file %s has mode %04o: group and others must have no access (run: chmod 600 %s)", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key file %s: %w", path, err)
	}
	key, err := ParseKey(string(b))
	clear(b)
	if err != nil {
		return nil, fmt.Errorf("read key file %s: %w", path, err)
	}
	return key, nil
}
