package webhook

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/taskgate/taskgate/policy"
)

// The event types an endpoint may ask for. The names follow Standard
// Webhooks' "Event types" advice (a dotted, hierarchical "type"), so a
// receiver can route on the prefix.
const (
	EventCreated       = "task.created"
	EventInputRequired = "task.input_required"
	EventCompleted     = "task.completed"
	EventFailed        = "task.failed"
	EventCancelled     = "task.cancelled"
	EventRerun         = "task.rerun"
)

// Events are every event type, in a task's order of life.
var Events = []string{EventCreated, EventInputRequired, EventCompleted, EventFailed, EventCancelled, EventRerun}

// Endpoint is one receiver the operator configured: only these URLs are
// ever called (SECURITY.md). Empty filters let everything through.
type Endpoint struct {
	// Name labels the endpoint in metrics, logs, the console and its
	// queue's keys: 1 to 64 of [A-Za-z0-9._-].
	Name string `json:"name"`
	// URL is where deliveries are POSTed: http or https, no userinfo.
	URL string `json:"url"`
	// Secrets sign every delivery, each "whsec_<base64>"; all of them at
	// once while one is being rotated (Standard Webhooks, "Signature
	// scheme": several space-separated signatures).
	Secrets []string `json:"secrets"`
	// Events are the event types sent; empty: all.
	Events []string `json:"events,omitempty"`
	// Tools are globs on the tool name (the rules' syntax, docs/policy.md);
	// empty: every tool.
	Tools []string `json:"tools,omitempty"`
	// Principals are the owners whose tasks are sent, in the form the
	// gateway keys owners by: "principal:<64 hex>" (a validated token's
	// principal) or "auth:<64 hex>" (the SHA-256 of an Authorization
	// header); empty: every owner.
	Principals []string `json:"principals,omitempty"`
}

// FieldError is what is wrong with one field of an endpoint.
type FieldError struct {
	Field string // "url", "secrets[1]", …
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Check reports the first thing wrong with e (a *FieldError).
func (e Endpoint) Check() error {
	if err := checkName(e.Name); err != nil {
		return err
	}
	if err := CheckURL(e.URL); err != nil {
		return &FieldError{Field: "url", Msg: err.Error()}
	}
	if len(e.Secrets) == 0 {
		return fieldErr("secrets", "at least one secret is required (whsec_ followed by base64): unsigned deliveries cannot be verified")
	}
	for i, s := range e.Secrets {
		if _, err := ParseSecret(s); err != nil {
			// The secret itself is never repeated in an error.
			return fieldErr(fmt.Sprintf("secrets[%d]", i), "%v", err)
		}
	}
	for i, ev := range e.Events {
		if !slices.Contains(Events, ev) {
			return fieldErr(fmt.Sprintf("events[%d]", i), "unknown event %q: want one of %s", ev, strings.Join(Events, ", "))
		}
	}
	for i, g := range e.Tools {
		if err := policy.CheckGlob(g); err != nil {
			return fieldErr(fmt.Sprintf("tools[%d]", i), "%v", err)
		}
	}
	for i, p := range e.Principals {
		if err := checkPrincipal(p); err != nil {
			return fieldErr(fmt.Sprintf("principals[%d]", i), "%v", err)
		}
	}
	return nil
}

func checkName(name string) error {
	if name == "" || len(name) > 64 {
		return fieldErr("name", "want 1 to 64 characters, got %d", len(name))
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return fieldErr("name", "%q: only letters, digits, '.', '_' and '-' (it names Redis keys and metric labels)", name)
		}
	}
	return nil
}

// CheckURL reports a URL deliveries cannot go to: not absolute http(s),
// no host, userinfo (credentials belong in the signature, and would be
// logged), or a fragment.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL: %v", errors.Unwrap(err))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q: want an http:// or https:// URL", raw)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%q: no host", raw)
	case u.User != nil:
		return errors.New("the URL carries a user or password: drop them (receivers verify the signature instead)")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return fmt.Errorf("%q: a fragment is never sent; drop it", raw)
	}
	return nil
}

// checkPrincipal accepts the owner forms a filter can name.
func checkPrincipal(p string) error {
	kind, digest, ok := strings.Cut(p, ":")
	if !ok || (kind != "principal" && kind != "auth") {
		return fmt.Errorf("%q: want principal:<64 hex digits> (a validated token's principal) or auth:<64 hex digits> (the SHA-256 of an Authorization header)", p)
	}
	if b, err := hex.DecodeString(digest); err != nil || len(b) != 32 || strings.ToLower(digest) != digest {
		return fmt.Errorf("%q: the digest after %q must be 64 lowercase hex digits", p, kind+":")
	}
	return nil
}

// CheckEndpoints checks each endpoint and that names are unique; errors
// name the endpoint by its 1-based index.
func CheckEndpoints(eps []Endpoint) error {
	seen := make(map[string]int, len(eps))
	for i, e := range eps {
		if err := e.Check(); err != nil {
			return fmt.Errorf("endpoint %d: %w", i+1, err)
		}
		if j, dup := seen[e.Name]; dup {
			return fmt.Errorf("endpoint %d: %w", i+1, fieldErr("name", "%q is also endpoint %d's name", e.Name, j))
		}
		seen[e.Name] = i + 1
	}
	return nil
}

// Wants reports whether an event of type typ about a task of tool, owned
// by owner, goes to e.
func (e Endpoint) Wants(typ, tool, owner string) bool {
	if len(e.Events) > 0 && !slices.Contains(e.Events, typ) {
		return false
	}
	if len(e.Principals) > 0 && !slices.Contains(e.Principals, owner) {
		return false
	}
	if len(e.Tools) == 0 {
		return true
	}
	for _, g := range e.Tools {
		if policy.MatchGlob(g, tool) {
			return true
		}
	}
	return false
}
