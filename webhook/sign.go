package webhook

// Signatures as the Standard Webhooks specification says
// (https://www.standardwebhooks.com, "Signature scheme" and "Verifying
// webhook authenticity"), so receivers verify with the libraries that
// exist (npm standardwebhooks, Svix's):
//
//	webhook-id:        the event id, the same on every attempt (receivers
//	                   drop duplicates by it)
//	webhook-timestamp: integer seconds since the epoch, of this attempt
//	webhook-signature: "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>",
//	                   one per secret, space-separated
//
// The key is the base64 after "whsec_".

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a delivery (Standard Webhooks, "Webhook headers").
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every secret (Standard Webhooks, "Symmetric
// signatures": "whsec_" then the base64 key).
const SecretPrefix = "whsec_"

// Secret lengths the specification recommends ("between 24 bytes and 64
// bytes"): shorter is guessable, longer buys nothing with SHA-256.
const (
	minSecretBytes = 24
	maxSecretBytes = 64
)

// DefaultTolerance is how far a delivery's timestamp may be from the
// receiver's clock (the reference libraries' 5 minutes): a replayed or
// stale delivery is refused.
const DefaultTolerance = 5 * time.Minute

// ParseSecret returns the key of a "whsec_<base64>" secret. Its errors
// never contain the secret.
func ParseSecret(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, errors.New("a secret must start with whsec_ followed by base64 (Standard Webhooks)")
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, errors.New("the part after whsec_ is not standard base64")
	}
	if len(key) < minSecretBytes || len(key) > maxSecretBytes {
		return nil, fmt.Errorf("the key is %d bytes; want %d to %d (Standard Webhooks); make one with: echo whsec_$(openssl rand -base64 32)", len(key), minSecretBytes, maxSecretBytes)
	}
	return key, nil
}

// Sign is one signature, "v1,<base64>", of body sent as id at ts.
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := ParseSecret(secret)
	if err != nil {
		return "", err
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, ts.Unix(), body)), nil
}

func mac(key []byte, id string, ts int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(nil, ts, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// SignatureHeader is the webhook-signature value: a signature per secret,
// space-separated, so a receiver holding any one of them verifies.
func SignatureHeader(secrets []string, id string, ts time.Time, body []byte) (string, error) {
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		sig, err := Sign(s, id, ts, body)
		if err != nil {
			return "", err
		}
		sigs = append(sigs, sig)
	}
	return strings.Join(sigs, " "), nil
}

// Verify checks a delivery as a receiver does: its headers present, its
// timestamp within tolerance of now, and one of its signatures made with
// one of secrets. It is what the tests and the docs' Go receiver use.
func Verify(secrets []string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, tsText, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || tsText == "" || sigs == "" {
		return errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q is not integer seconds", tsText)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("webhook-timestamp %d is %s away from now: stale or replayed", ts, d.Round(time.Second))
	}
	for _, s := range secrets {
		key, err := ParseSecret(s)
		if err != nil {
			return err
		}
		want := mac(key, id, ts, body)
		for sig := range strings.FieldsSeq(sigs) {
			v, b64, ok := strings.Cut(sig, ",")
			if !ok || v != "v1" {
				continue // another scheme (v1a: asymmetric) is not ours
			}
			got, err := base64.StdEncoding.DecodeString(b64)
			if err == nil && hmac.Equal(got, want) {
				return nil
			}
		}
	}
	return errors.New("no signature matches")
}
