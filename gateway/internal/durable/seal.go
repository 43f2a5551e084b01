package durable

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
)

// The Authorization a task's call was made with goes into its Spec sealed
// (AES-256-GCM under a secret the replicas share through the store, the
// task's id as associated data), never in clear: a key dump, SLOWLOG or
// MONITOR output shows no token, and a sealed value moved to another task
// does not open. As with the credentials the gateway keeps
// (docs/identity.md), it cannot guard against a reader of the whole store,
// which holds the secret too.

// errSealed: a sealed value that does not open with the secret.
var errSealed = errors.New("durable: a sealed credential does not open with the shared secret")

// Seal encrypts plain for the task id with secret (32 bytes).
func Seal(secret []byte, id string, plain []byte) ([]byte, error) {
	aead, err := gcm(secret)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return aead.Seal(nonce, nonce, plain, []byte(id)), nil
}

// Open is Seal's inverse.
func Open(secret []byte, id string, sealed []byte) ([]byte, error) {
	aead, err := gcm(secret)
	if err != nil {
		return nil, err
	}
	if len(sealed) < aead.NonceSize() {
		return nil, errSealed
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte(id))
	if err != nil {
		return nil, errSealed
	}
	return plain, nil
}

func gcm(secret []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(secret)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
