package main

// Sessions of --upstream-command follow their child across replicas: with a
// child per session, a request for a session whose child runs on another
// replica is forwarded there over the hop (upstream/stdio/replicas.go,
// docs/stdio-replicas.md).

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/upstream/stdio"
)

// hopSecret names the shared secret (taskstore.SharedSecret) the hop is
// signed with: its own, apart from the others the gateway signs with.
const hopSecret = "stdio-hop"

func advertiseFlag() cli.Flag {
	return &cli.StringFlag{Name: "advertise-url", EnvVars: env("advertise-url"), Category: catListen,
		DefaultText: "the --listen address, or this host's one non-loopback address when --listen is 0.0.0.0 or [::]",
		Usage:       "`URL` (scheme://host:port) at which the other replicas reach this one: a request for an --upstream-command session whose process runs here, landing on another replica, is forwarded to it (with a process per session and --redis-url)"}
}

// joinReplicas makes the stdio sessions opened here reachable from the
// other replicas sharing --redis-url, and returns the handler to serve
// (h, with the hop at stdio.HopPath) and what to call before the store
// closes. It does nothing without a child per session or a shared store.
func joinReplicas(c *cli.Context, h http.Handler, up *openedUpstream, store *openedStore, listen net.Addr, scheme string, log zerolog.Logger) (http.Handler, func(), error) {
	adv := c.String("advertise-url")
	switch {
	case up.bridge == nil:
		if adv != "" {
			return nil, nil, errors.New("--advertise-url goes with --upstream-command, not --upstream")
		}
		return h, func() {}, nil
	case !up.bridge.PerSession() || c.String("redis-url") == "":
		if adv != "" {
			return nil, nil, errors.New("--advertise-url goes with a process per session and --redis-url: only then do sessions live on one replica among several")
		}
		return h, func() {}, nil
	case c.String("path") == stdio.HopPath:
		return nil, nil, fmt.Errorf("invalid --path %s: the replicas use it among themselves", stdio.HopPath)
	}
	self, err := advertiseURL(adv, listen, scheme, net.InterfaceAddrs)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
	defer cancel()
	secret, err := store.SharedSecret(ctx, hopSecret)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the replicas' shared secret from --redis-url: %v", err)
	}
	tlsCfg, err := hopTLS(c.String("tls-cert"))
	if err != nil {
		return nil, nil, err
	}
	leave, err := up.bridge.JoinReplicas(stdio.Replicas{Directory: store.Store, URL: self, Secret: secret, TLS: tlsCfg})
	if err != nil {
		return nil, nil, err
	}
	log.Info().Str("advertise_url", self).Msg("stdio sessions follow their process: other replicas forward their requests here")
	hop := up.bridge.HopHandler()
	routed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == stdio.HopPath {
			hop.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
	return routed, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		leave(ctx)
	}, nil
}

// hopTLS is what the hop trusts with --tls-cert: the system's roots and
// the certificates of --tls-cert, which replicas usually share.
func hopTLS(certFile string) (*tls.Config, error) {
	if certFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("invalid --tls-cert: %v", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("invalid --tls-cert %s: no PEM certificate in it", certFile)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}, nil
}

// advertiseURL is --advertise-url checked, or the URL derived from the
// listener: its own address, or when it listens on every address, the
// host's one non-loopback address (preferring IPv4). addrs lists the
// host's addresses.
func advertiseURL(flag string, listen net.Addr, scheme string, addrs func() ([]net.Addr, error)) (string, error) {
	if flag != "" {
		u, err := url.Parse(flag)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return "", fmt.Errorf("invalid --advertise-url %q: want scheme://host:port (http or https, no path), the address the other replicas reach this one at", flag)
		}
		return u.Scheme + "://" + u.Host, nil
	}
	tcp, ok := listen.(*net.TCPAddr)
	if !ok {
		return "", fmt.Errorf("cannot derive --advertise-url from the listener %s: give --advertise-url", listen)
	}
	port := strconv.Itoa(tcp.Port)
	if !tcp.IP.IsUnspecified() {
		return scheme + "://" + net.JoinHostPort(tcp.IP.String(), port), nil
	}
	list, err := addrs()
	if err != nil {
		return "", fmt.Errorf("cannot derive --advertise-url: cannot list this host's addresses (%v): give --advertise-url %s://HOST:%s", err, scheme, port)
	}
	var v4, v6 []string
	for _, a := range list {
		n, ok := a.(*net.IPNet)
		if !ok || !n.IP.IsGlobalUnicast() { // loopback, link-local, multicast
			continue
		}
		if n.IP.To4() != nil {
			v4 = append(v4, n.IP.String())
		} else {
			v6 = append(v6, n.IP.String())
		}
	}
	switch {
	case len(v4) == 1:
		return scheme + "://" + net.JoinHostPort(v4[0], port), nil
	case len(v4) == 0 && len(v6) == 1:
		return scheme + "://" + net.JoinHostPort(v6[0], port), nil
	case len(v4)+len(v6) == 0:
		return "", fmt.Errorf("cannot derive --advertise-url: --listen %s is every address of this host, and it has none but loopback: give --advertise-url %s://HOST:%s, the address the other replicas reach this one at", listen, scheme, port)
	}
	return "", fmt.Errorf("cannot derive --advertise-url: --listen %s is every address of this host, which has several (%s): give --advertise-url %s://HOST:%s, the address the other replicas reach this one at",
		listen, strings.Join(append(v4, v6...), ", "), scheme, port)
}
