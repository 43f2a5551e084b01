package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/upstream"
)

// upstreamFlags reach the upstream the way it wants: its CA, a client
// certificate, headers it requires (serve and tools).
func upstreamFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "upstream-ca", Category: catUpstream, EnvVars: env("upstream-ca"), TakesFile: true,
			Usage: "PEM `FILE` of the CA certificates that sign an https upstream's certificate (default: the system's)"},
		&cli.StringFlag{Name: "upstream-client-cert", Category: catUpstream, EnvVars: env("upstream-client-cert"), TakesFile: true,
			Usage: "PEM certificate `FILE` the gateway presents to an https upstream (with --upstream-client-key)"},
		&cli.StringFlag{Name: "upstream-client-key", Category: catUpstream, EnvVars: env("upstream-client-key"), TakesFile: true,
			Usage: "PEM private key `FILE` of --upstream-client-cert"},
		&cli.StringSliceFlag{Name: "upstream-header", Category: catUpstream, EnvVars: env("upstream-header"),
			Usage: "`'Name: value'` header sent on every request to the upstream's MCP endpoint, never on the OAuth discovery pass-through (repeatable); ${VAR} in the value is taken from the environment, so secrets stay out of argv"},
		upstreamTransportFlag(),
	}
}

// upstreamOptions builds the upstream client's options from the flags.
func upstreamOptions(c *cli.Context) (upstream.Options, error) {
	var opts upstream.Options
	if h, err := upstreamHeaders(c.StringSlice("upstream-header"), os.LookupEnv); err != nil {
		return opts, err
	} else if len(h) > 0 {
		opts.Header = h
	}
	ca, cert, key := c.String("upstream-ca"), c.String("upstream-client-cert"), c.String("upstream-client-key")
	if ca == "" && cert == "" && key == "" {
		return opts, nil
	}
	cfg, err := caTLSConfig(ca, "--upstream-ca")
	if err != nil {
		return opts, err
	}
	if (cert == "") != (key == "") {
		return opts, fmt.Errorf("--upstream-client-cert and --upstream-client-key go together: give both or neither")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return opts, fmt.Errorf("invalid --upstream-client-cert/--upstream-client-key: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	opts.TLSConfig = cfg
	return opts, nil
}

// caTLSConfig is the TLS configuration that trusts the CA certificates of
// the PEM file at path (given as flag) instead of the system's; with no
// path, the system's.
func caTLSConfig(path, flag string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if path == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("invalid %s: %v", flag, err)
	}
	cfg.RootCAs = x509.NewCertPool()
	if !cfg.RootCAs.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("invalid %s %s: no PEM certificate in it", flag, path)
	}
	return cfg, nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// upstreamHeaders parses 'Name: value' headers, expanding ${VAR} from
// lookup; a missing variable is an error, so a secret is never silently
// sent empty.
func upstreamHeaders(specs []string, lookup func(string) (string, bool)) (http.Header, error) {
	h := http.Header{}
	for _, spec := range specs {
		name, value, ok := strings.Cut(spec, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") {
			return nil, fmt.Errorf("invalid --upstream-header %q: want 'Name: value'", spec)
		}
		var missing string
		value = envRef.ReplaceAllStringFunc(value, func(ref string) string {
			v, ok := lookup(envRef.FindStringSubmatch(ref)[1])
			if !ok && missing == "" {
				missing = ref
			}
			return v
		})
		if missing != "" {
			return nil, fmt.Errorf("invalid --upstream-header %s: the environment has no %s", name, missing)
		}
		if strings.ContainsAny(value, "\r\n") {
			return nil, fmt.Errorf("invalid --upstream-header %s: the value has a line break", name)
		}
		h.Add(name, value)
	}
	return h, nil
}

// certReloader serves the certificate of --tls-cert/--tls-key and loads
// it again when either file changes (checked at most every second, on a
// handshake), so a renewed certificate needs no restart.
type certReloader struct {
	certFile, keyFile string
	log               zerolog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string    // the files' sizes and modification times at the last load
	checked time.Time // the last look at the files
}

func newCertReloader(certFile, keyFile string, log zerolog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: log}
	if err := r.load(); err != nil {
		return nil, fmt.Errorf("invalid --tls-cert/--tls-key: %v", err)
	}
	return r, nil
}

func (r *certReloader) fileStamp() (string, error) {
	var b strings.Builder
	for _, f := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%d/%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String(), nil
}

// load reads the pair; on error the certificate served stays as it was.
func (r *certReloader) load() error {
	stamp, err := r.fileStamp()
	if err != nil {
		return err
	}
	pair, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return err
	}
	r.cert, r.stamp = &pair, stamp
	return nil
}

// getCertificate is tls.Config.GetCertificate.
func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= time.Second {
		r.checked = now
		if stamp, err := r.fileStamp(); err == nil && stamp != r.stamp {
			if err := r.load(); err != nil {
				r.log.Warn().Err(err).Msg("cannot load the changed --tls-cert/--tls-key; serving the previous certificate")
			} else {
				r.log.Info().Msg("TLS certificate reloaded")
			}
		}
	}
	return r.cert, nil
}
