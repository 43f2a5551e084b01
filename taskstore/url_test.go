package taskstore

import (
	"strings"
	"testing"
	"time"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		url          string
		addrs        []string
		db           int
		user, pass   string
		master       string
		sentinelPass string
		cluster, tls bool
		dialTimeout  time.Duration
		wantErr      string
	}{
		{url: "redis://localhost:6380/2", addrs: []string{"localhost:6380"}, db: 2, dialTimeout: DefaultDialTimeout},
		{url: "redis://:secret@h", addrs: []string{"h:6379"}, pass: "secret", dialTimeout: DefaultDialTimeout},
		{url: "rediss://u:p@h:6390?dial_timeout=5s", addrs: []string{"h:6390"}, user: "u", pass: "p", tls: true, dialTimeout: 5 * time.Second},
		{url: "redis+cluster://a:7000,b:7001,c", addrs: []string{"a:7000", "b:7001", "c:6379"}, cluster: true, dialTimeout: DefaultDialTimeout},
		{url: "redis+cluster://one:7000", addrs: []string{"one:7000"}, cluster: true, dialTimeout: DefaultDialTimeout},
		{url: "rediss+cluster://u:p@a:7000,b:7001/?read_timeout=3", addrs: []string{"a:7000", "b:7001"}, user: "u", pass: "p", cluster: true, tls: true, dialTimeout: DefaultDialTimeout},
		{url: "redis+sentinel://s1:26379,s2/mymaster/3?sentinel_password=sp", addrs: []string{"s1:26379", "s2:26379"}, master: "mymaster", db: 3, sentinelPass: "sp", dialTimeout: DefaultDialTimeout},
		{url: "redis+sentinel://:pw@s1/mymaster", addrs: []string{"s1:26379"}, master: "mymaster", pass: "pw", dialTimeout: DefaultDialTimeout},
		{url: "localhost:6379", wantErr: "missing scheme"},
		{url: "http://x", wantErr: "unknown scheme"},
		{url: "redis+shard://x", wantErr: "unknown scheme"},
		{url: "redis+cluster:///", wantErr: "no hosts"},
		{url: "redis+cluster://a:1/3", wantErr: "no path"},
		{url: "redis+sentinel://s1", wantErr: "master name"},
		{url: "redis://h?bogus=1", wantErr: "bogus"},
		{url: "redis://u:hunter2@h?bogus=1", wantErr: "xxxxx"},
	} {
		o, err := ParseURL(c.url)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: err = %v, want %q", c.url, err, c.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("%s: error leaks the password: %v", c.url, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		if strings.Join(o.Addrs, ",") != strings.Join(c.addrs, ",") || o.DB != c.db || o.Username != c.user ||
			o.Password != c.pass || o.MasterName != c.master || o.SentinelPassword != c.sentinelPass ||
			o.IsClusterMode != c.cluster || (o.TLSConfig != nil) != c.tls || o.DialTimeout != c.dialTimeout ||
			o.MaxRetries != DefaultMaxRetries {
			t.Errorf("%s: got %+v", c.url, o)
		}
	}
}

func TestDial(t *testing.T) {
	e := openMiniredis(t)
	c, err := Dial(ctx, "redis://"+e.mini.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	start := time.Now()
	_, err = Dial(ctx, "redis://127.0.0.1:1")
	wantErr(t, err, ErrUnavailable)
	if time.Since(start) > 2*time.Second {
		t.Errorf("Dial to a closed port took %v", time.Since(start))
	}
}
