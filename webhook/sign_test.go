package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// testSecret is a 32-byte key: whsec_ + base64.
var testSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

// specSign is the signature written straight from the Standard Webhooks
// text ("Signature scheme"), independent of Sign: base64 of
// HMAC-SHA256(base64decode(secret minus "whsec_"), "{id}.{ts}.{body}").
func specSign(secret, id string, ts int64, body string) string {
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	h := hmac.New(sha256.New, key)
	fmt.Fprintf(h, "%s.%d.%s", id, ts, body)
	return "v1," + base64.StdEncoding.EncodeToString(h.Sum(nil))
}

func TestSignMatchesSpec(t *testing.T) {
	ts := time.Unix(1700000000, 0)
	body := `{"type":"task.completed","timestamp":"2023-11-14T22:13:20Z","data":{}}`
	got, err := Sign(testSecret, "evt_x_1", ts, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if want := specSign(testSecret, "evt_x_1", 1700000000, body); got != want {
		t.Fatalf("Sign = %s, the spec's = %s", got, want)
	}
	// Verify with the spec's own signature, not Sign's.
	h := http.Header{}
	h.Set(HeaderID, "evt_x_1")
	h.Set(HeaderTimestamp, "1700000000")
	h.Set(HeaderSignature, specSign(testSecret, "evt_x_1", 1700000000, body))
	if err := Verify([]string{testSecret}, h, []byte(body), ts.Add(time.Minute), DefaultTolerance); err != nil {
		t.Fatalf("Verify refused a spec signature: %v", err)
	}
}

func TestVerifyRefuses(t *testing.T) {
	now := time.Unix(1700000000, 0)
	body := []byte(`{"a":1}`)
	other := "whsec_" + base64.StdEncoding.EncodeToString([]byte("ffffffffffffffffffffffffffffffff"))
	good := func() http.Header {
		h := http.Header{}
		h.Set(HeaderID, "evt_1")
		h.Set(HeaderTimestamp, "1700000000")
		sig, _ := SignatureHeader([]string{other, testSecret}, "evt_1", now, body)
		h.Set(HeaderSignature, sig)
		return h
	}
	if err := Verify([]string{testSecret}, good(), body, now, DefaultTolerance); err != nil {
		t.Fatalf("a rotation header (two signatures) must verify with either secret: %v", err)
	}
	cases := map[string]func(h http.Header) ([]byte, time.Time){
		"unsigned": func(h http.Header) ([]byte, time.Time) { h.Del(HeaderSignature); return body, now },
		"wrong secret": func(h http.Header) ([]byte, time.Time) {
			h.Set(HeaderSignature, specSign(other, "evt_1", now.Unix(), string(body)))
			return body, now
		},
		"body changed":  func(h http.Header) ([]byte, time.Time) { return []byte(`{"a":2}`), now },
		"id changed":    func(h http.Header) ([]byte, time.Time) { h.Set(HeaderID, "evt_2"); return body, now },
		"stale":         func(h http.Header) ([]byte, time.Time) { return body, now.Add(6 * time.Minute) },
		"future":        func(h http.Header) ([]byte, time.Time) { return body, now.Add(-6 * time.Minute) },
		"bad timestamp": func(h http.Header) ([]byte, time.Time) { h.Set(HeaderTimestamp, "17e8"); return body, now },
		"v1a only":      func(h http.Header) ([]byte, time.Time) { h.Set(HeaderSignature, "v1a,AAAA"); return body, now },
	}
	for name, mod := range cases {
		h := good()
		b, at := mod(h)
		if name == "wrong secret" {
			if err := Verify([]string{testSecret}, h, b, at, DefaultTolerance); err == nil {
				t.Errorf("%s: verified", name)
			}
			continue
		}
		if err := Verify([]string{testSecret}, h, b, at, DefaultTolerance); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

func TestParseSecretNeverEchoes(t *testing.T) {
	for _, s := range []string{"secret-abc", "whsec_!!!notbase64", "whsec_" + base64.StdEncoding.EncodeToString([]byte("short")),
		"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 65))} {
		_, err := ParseSecret(s)
		if err == nil {
			t.Errorf("%q accepted", s)
			continue
		}
		if strings.Contains(err.Error(), strings.TrimPrefix(s, "whsec_")) {
			t.Errorf("the error repeats the secret: %v", err)
		}
	}
}
