package taskstore

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Client defaults, chosen so that calls fail fast (ErrUnavailable) instead
// of hanging when Redis is down. A URL's query parameters override them.
const (
	DefaultDialTimeout  = time.Second
	DefaultReadTimeout  = 2 * time.Second
	DefaultWriteTimeout = 2 * time.Second
	DefaultPoolTimeout  = 2 * time.Second
	DefaultMaxRetries   = 1
	// DefaultDialerRetries: go-redis' default (5 dials 100ms apart) turns a
	// refused connection into a half-second stall.
	DefaultDialerRetries = 1
)

// ParseURL turns a --redis-url into client options. The forms (see doc.go):
//
//	redis://[user:pass@]host[:port][/db][?opt=…]               standalone
//	rediss://…                                                   standalone, TLS
//	redis+cluster://[user:pass@]host:port[,host:port…][?opt=…]  Cluster seeds
//	rediss+cluster://…                                           Cluster, TLS
//	redis+sentinel://[user:pass@]host:port[,host:port…]/master[/db][?opt=…]
//	rediss+sentinel://…                                          Sentinel, TLS
//
// user:pass authenticate to the Redis servers; for Sentinel the sentinels'
// own credentials go in sentinel_username / sentinel_password. The query
// options are those of go-redis' ParseURL (dial_timeout, read_timeout,
// write_timeout, pool_size, pool_timeout, max_retries, protocol,
// client_name, skip_verify, …; a bare number is seconds).
func ParseURL(raw string) (*redis.UniversalOptions, error) {
	o, err := parseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("taskstore: redis url %s: %w", RedactURL(raw), err)
	}
	return o, nil
}

func parseURL(raw string) (*redis.UniversalOptions, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, fmt.Errorf("missing scheme (redis://, rediss://, redis+cluster://, redis+sentinel://)")
	}
	base, mode, _ := strings.Cut(strings.ToLower(scheme), "+")
	if base != "redis" && base != "rediss" {
		return nil, fmt.Errorf("unknown scheme %q", scheme)
	}
	if mode == "" {
		o, err := redis.ParseURL(raw)
		if err != nil {
			return nil, err
		}
		u := fromOptions(o)
		return withClientDefaults(u, raw), nil
	}
	if mode != "cluster" && mode != "sentinel" {
		return nil, fmt.Errorf("unknown scheme %q", scheme)
	}

	// Split authority (with its comma-separated hosts) from path and query:
	// net/url does not accept several hosts.
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	userinfo, hosts := "", authority
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		userinfo, hosts = authority[:i+1], authority[i+1:]
	}
	var addrs []string
	for _, h := range strings.Split(hosts, ",") {
		if h == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			def := "6379"
			if mode == "sentinel" {
				def = "26379"
			}
			h = net.JoinHostPort(h, def)
		}
		addrs = append(addrs, h)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("no hosts")
	}
	path, query, _ := strings.Cut(tail, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, err
	}

	var master, db string
	switch mode {
	case "cluster":
		if strings.Trim(path, "/") != "" {
			return nil, fmt.Errorf("a cluster URL has no path (Cluster has only db 0)")
		}
	case "sentinel":
		parts := strings.Split(strings.Trim(path, "/"), "/")
		if parts[0] == "" || len(parts) > 2 {
			return nil, fmt.Errorf("want /<master name>[/<db>] after the sentinel hosts")
		}
		master = parts[0]
		if len(parts) == 2 {
			db = "/" + parts[1]
		}
	}
	sentinelUser, sentinelPass := q.Get("sentinel_username"), q.Get("sentinel_password")
	q.Del("sentinel_username")
	q.Del("sentinel_password")

	// Reuse go-redis' parser for credentials, TLS and every query option by
	// handing it the equivalent standalone URL.
	single := base + "://" + userinfo + addrs[0] + db
	if enc := q.Encode(); enc != "" {
		single += "?" + enc
	}
	so, err := redis.ParseURL(single)
	if err != nil {
		return nil, err
	}
	u := fromOptions(so)
	u.Addrs = addrs
	switch mode {
	case "cluster":
		u.IsClusterMode = true
	case "sentinel":
		u.MasterName = master
		u.SentinelUsername, u.SentinelPassword = sentinelUser, sentinelPass
		if u.TLSConfig != nil {
			u.TLSConfig.ServerName = "" // several hosts: verify each by its own name
		}
	}
	if mode == "cluster" && u.TLSConfig != nil {
		u.TLSConfig.ServerName = ""
	}
	return withClientDefaults(u, raw), nil
}

// fromOptions copies the standalone options go-redis parsed from a URL.
func fromOptions(o *redis.Options) *redis.UniversalOptions {
	return &redis.UniversalOptions{
		Addrs:                 []string{o.Addr},
		ClientName:            o.ClientName,
		DB:                    o.DB,
		Protocol:              o.Protocol,
		Username:              o.Username,
		Password:              o.Password,
		MaxRetries:            o.MaxRetries,
		DialerRetries:         o.DialerRetries,
		DialerRetryTimeout:    o.DialerRetryTimeout,
		MinRetryBackoff:       o.MinRetryBackoff,
		MaxRetryBackoff:       o.MaxRetryBackoff,
		DialTimeout:           o.DialTimeout,
		ReadTimeout:           o.ReadTimeout,
		WriteTimeout:          o.WriteTimeout,
		ContextTimeoutEnabled: o.ContextTimeoutEnabled,
		PoolFIFO:              o.PoolFIFO,
		PoolSize:              o.PoolSize,
		PoolTimeout:           o.PoolTimeout,
		MinIdleConns:          o.MinIdleConns,
		MaxIdleConns:          o.MaxIdleConns,
		MaxActiveConns:        o.MaxActiveConns,
		ConnMaxIdleTime:       o.ConnMaxIdleTime,
		ConnMaxLifetime:       o.ConnMaxLifetime,
		TLSConfig:             o.TLSConfig,
	}
}

// withClientDefaults applies the fail-fast defaults for options the URL did
// not set. go-redis fills a parsed-but-absent duration with its own default,
// so "set" is judged by the query string.
func withClientDefaults(u *redis.UniversalOptions, raw string) *redis.UniversalOptions {
	q := url.Values{}
	if _, query, ok := strings.Cut(raw, "?"); ok {
		q, _ = url.ParseQuery(query)
	}
	// CLIENT SETINFO only names the library on each connection, and
	// servers before Redis 7.2 (and the embedded one) refuse it: an error
	// on every connect that says nothing is wrong.
	u.DisableIdentity = true
	// CLIENT MAINT_NOTIFICATIONS (Redis Enterprise's maintenance events)
	// likewise: refused by every other server.
	u.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if !q.Has("dial_timeout") {
		u.DialTimeout = DefaultDialTimeout
	}
	if !q.Has("read_timeout") {
		u.ReadTimeout = DefaultReadTimeout
	}
	if !q.Has("write_timeout") {
		u.WriteTimeout = DefaultWriteTimeout
	}
	if !q.Has("pool_timeout") {
		u.PoolTimeout = DefaultPoolTimeout
	}
	if !q.Has("max_retries") {
		u.MaxRetries = DefaultMaxRetries
	}
	if !q.Has("dialer_retries") {
		u.DialerRetries = DefaultDialerRetries
	}
	return u
}

// RedactURL hides the password in a Redis URL, for messages and logs.
func RedactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "(unparsable)"
	}
	at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@")
	if at < 0 {
		return raw
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return raw
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// Dial parses a --redis-url, makes the client and checks it answers PING
// within the dial timeout. The caller closes the client.
func Dial(ctx context.Context, rawURL string) (redis.UniversalClient, error) {
	o, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	c := redis.NewUniversalClient(o)
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("taskstore: redis %s: %w", RedactURL(rawURL), classify(ctx, err))
	}
	return c, nil
}
