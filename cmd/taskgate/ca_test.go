package main

import (
	"bytes"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/internal/testupstream"
)

// TestCallAndToolsCA: against an https MCP server whose certificate is
// not the system's, call and tools fail naming the fix (--ca), and work
// with --ca and the server's certificate as a PEM file.
func TestCallAndToolsCA(t *testing.T) {
	srv := httptest.NewTLSServer(testupstream.Handler(testupstream.Options{}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := srv.URL + "/mcp"
	for _, c := range []struct {
		args             []string
		wantErr, wantOut string
	}{
		{[]string{"call", url, "echo", "text=hi"}, "give the CA that signs it with --ca FILE", ""},
		{[]string{"call", url, "echo", "text=hi", "--ca", caFile}, "", "hi"},
		{[]string{"call", "--ca", caFile, url, "echo", "text=hi", "--header", "X-Test: 1"}, "", "hi"},
		{[]string{"call", url, "echo", "--ca", filepath.Join(dir, "missing.pem")}, "invalid --ca", ""},
		{[]string{"call", url, "echo", "--ca", notPEM}, "no PEM certificate", ""},
		{[]string{"tools", "--upstream", url}, "give the CA that signs it with --ca FILE", ""},
		{[]string{"tools", "--upstream", url, "--ca", caFile, "--header", "X-Test: 1"}, "", "echo"},
	} {
		var out, errOut bytes.Buffer
		err := run(append([]string{"taskgate"}, c.args...), &out, &errOut)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%q: %v\nstderr: %s", c.args, err, errOut.String())
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%q: error %v, want %q", c.args, err, c.wantErr)
		case !strings.Contains(out.String(), c.wantOut):
			t.Errorf("%q: stdout %q, want %q", c.args, out.String(), c.wantOut)
		}
	}
}
