package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// testCA signs the certificates of one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "taskgate test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pool: x509.NewCertPool()}
	ca.pool.AddCert(cert)
	return ca
}

// issue returns a PEM certificate and key for 127.0.0.1 with serial.
func (ca *testCA) issue(t *testing.T, serial int64, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func writeFile(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTLS: the gateway serves HTTPS with --tls-cert/--tls-key and picks up
// a renewed certificate without a restart; it reaches an upstream that
// wants mutual TLS (--upstream-ca, --upstream-client-cert/key) and a
// header (--upstream-header, its value from the environment), on relayed
// requests and on its own calls alike.
func TestTLS(t *testing.T) {
	if buildErr != nil {
		t.Fatalf("taskgate binary unavailable: %v", buildErr)
	}
	dir := t.TempDir()
	ca := newTestCA(t)
	var mu sync.Mutex
	var keys []string
	upH := testupstream.Handler(testupstream.Options{})
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		upH.ServeHTTP(w, r)
	}))
	srvCert, srvKey := ca.issue(t, 10, x509.ExtKeyUsageServerAuth)
	pair, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	up.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.pool}
	up.StartTLS()
	defer up.Close()

	clientCert, clientKey := ca.issue(t, 11, x509.ExtKeyUsageClientAuth)
	gwCert, gwKey := ca.issue(t, 1, x509.ExtKeyUsageServerAuth)
	certFile, keyFile := writeFile(t, filepath.Join(dir, "cert.pem"), gwCert), writeFile(t, filepath.Join(dir, "key.pem"), gwKey)
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(taskgateBin, "serve", "--listen", addr, "--upstream", up.URL+"/mcp",
		"--tls-cert", certFile, "--tls-key", keyFile,
		"--upstream-ca", writeFile(t, filepath.Join(dir, "ca.pem"), ca.pem),
		"--upstream-client-cert", writeFile(t, filepath.Join(dir, "client.pem"), clientCert),
		"--upstream-client-key", writeFile(t, filepath.Join(dir, "client-key.pem"), clientKey),
		"--upstream-header", "X-Api-Key: ${TASKGATE_E2E_API_KEY}")
	cmd.Env = append(os.Environ(), "TASKGATE_E2E_API_KEY=k-42")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("taskgate output:\n%s", out.String())
		}
	}()

	// serial connects anew and returns the serial number of the
	// gateway's certificate (0 when it does not answer yet).
	serial := func() int64 {
		c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: ca.pool}, DisableKeepAlives: true}}
		resp, err := c.Get("https://" + addr + "/healthz")
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.TLS == nil {
			return 0
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
	}
	waitSerial := func(want int64) {
		deadline := time.Now().Add(15 * time.Second)
		for serial() != want {
			if time.Now().After(deadline) {
				t.Fatalf("the gateway never served certificate %d (serves %d)", want, serial())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitSerial(1)

	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}}}
	post := func(method, body string, header map[string]string) string {
		req, _ := http.NewRequest(http.MethodPost, "https://"+addr+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: HTTP %d %s", method, resp.StatusCode, b)
		}
		return string(b)
	}
	// Relayed: a 2025-06-18 session's initialize.
	init := post("initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, nil)
	if !strings.Contains(init, `"protocolVersion"`) {
		t.Fatalf("initialize through the gateway: %s", init)
	}
	// The gateway's own calls: a 2026-07-28 request makes it probe the
	// upstream's era and hold the call itself.
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	call := post("tools/call", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"over tls"},`+meta+`}}`,
		map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"})
	if !strings.Contains(call, "over tls") {
		t.Fatalf("tools/call through the gateway: %s", call)
	}
	mu.Lock()
	for _, k := range keys {
		if k != "k-42" {
			t.Errorf("the upstream got X-Api-Key %q, want the one from the environment", k)
		}
	}
	if len(keys) < 3 {
		t.Errorf("the upstream saw %d requests, want the initialize, the era probe and the call", len(keys))
	}
	mu.Unlock()

	// A renewed certificate in place of the old one is served to new
	// connections.
	renewed, renewedKey := ca.issue(t, 2, x509.ExtKeyUsageServerAuth)
	writeFile(t, certFile+".new", renewed)
	writeFile(t, keyFile+".new", renewedKey)
	if err := os.Rename(keyFile+".new", keyFile); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(certFile+".new", certFile); err != nil {
		t.Fatal(err)
	}
	waitSerial(2)
	if strings.Contains(out.String(), "k-42") {
		t.Error("the upstream header's secret value is in the log")
	}
}
