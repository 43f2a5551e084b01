package auth

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/internal/authtest"
)

func TestBearerToken(t *testing.T) {
	big := strings.Repeat("a", MaxTokenSize+1)
	for _, tc := range []struct {
		name   string
		values []string
		token  string
		want   error
	}{
		{"none", nil, "", ErrNoToken},
		{"bearer", []string{"Bearer abc.def-_~+/=="}, "abc.def-_~+/==", nil},
		{"scheme in any case", []string{"bEARER tok"}, "tok", nil},
		{"several spaces", []string{"Bearer   tok"}, "tok", nil},
		{"largest", []string{"Bearer " + big[1:]}, big[1:], nil},
		{"another scheme", []string{"Basic dXNlcjpwYXNz"}, "", ErrNoToken},
		{"scheme only", []string{"Bearer"}, "", ErrInvalidToken},
		{"empty token", []string{"Bearer "}, "", ErrInvalidToken},
		{"two headers", []string{"Bearer a", "Bearer b"}, "", ErrBadRequest},
		{"over 16 KiB", []string{"Bearer " + big}, "", ErrBadRequest},
		{"space inside", []string{"Bearer a b"}, "", ErrInvalidToken},
		{"only padding", []string{"Bearer =="}, "", ErrInvalidToken},
		{"padding inside", []string{"Bearer a=b"}, "", ErrInvalidToken},
		{"control character", []string{"Bearer a\x00b"}, "", ErrInvalidToken},
		{"non-ASCII", []string{"Bearer tøken"}, "", ErrInvalidToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tc.values {
				h.Add("Authorization", v)
			}
			got, err := BearerToken(h)
			if !errors.Is(err, tc.want) || got != tc.token {
				t.Fatalf("got %q, %v; want %q, %v", got, err, tc.token, tc.want)
			}
		})
	}
}

// FuzzBearerToken: any Authorization value gives a token68 of at most
// MaxTokenSize or one of the sentinels, and no message quotes it.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer a.b.c", "Basic x", "Bearer ", "Bearer a b", "Bearer ==", "Bearer a==",
		"Bearer eyJhbGciOiJub25lIn0.e30.", "Bearer\tx", strings.Repeat("B", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		tok, err := BearerToken(http.Header{"Authorization": {v}})
		if err != nil {
			if tok != "" || !(errors.Is(err, ErrNoToken) || errors.Is(err, ErrBadRequest) || errors.Is(err, ErrInvalidToken)) {
				t.Fatalf("%q: %q, %v", v, tok, err)
			}
			_, cand, _ := strings.Cut(v, " ")
			if cand = strings.TrimLeft(cand, " "); len(cand) >= 8 && strings.Contains(err.Error(), cand) {
				t.Fatalf("the error quotes the token: %v", err)
			}
			return
		}
		if tok == "" || len(tok) > MaxTokenSize || !isToken68(tok) || !strings.HasSuffix(v, tok) {
			t.Fatalf("%q gave token %q", v, tok)
		}
	})
}

// FuzzGuardJWT: any Authorization value is a principal or one of the
// sentinels, never a panic; tokens that verify are only the issuer's.
func FuzzGuardJWT(f *testing.F) {
	ti := authtest.NewIssuer(f, "", false)
	good := ti.Token(ti.Claims(testAudience))
	for _, s := range []string{"Bearer " + good, "Bearer " + good[:len(good)-3], "Bearer eyJhbGciOiJub25lIn0.e30.", "Bearer a.b.c", "Basic x"} {
		f.Add(s)
	}
	g, err := New(Config{Issuer: ti.URL, Audience: []string{testAudience}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, v string) {
		p, err := g.Authenticate(context.Background(), http.Header{"Authorization": {v}})
		switch {
		case err == nil:
			if p.Issuer != ti.URL || p.Subject != "alice" {
				t.Fatalf("%q passed as %+v", v, p)
			}
		case !(errors.Is(err, ErrNoToken) || errors.Is(err, ErrBadRequest) || errors.Is(err, ErrInvalidToken)):
			t.Fatalf("%q: %v", v, err)
		}
	})
}
