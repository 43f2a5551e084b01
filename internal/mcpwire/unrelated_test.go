package mcpwire

import "testing"

// TestCarriesUnrelated: a tools/call, resources/read or prompts/get carries
// a server's question that names no call; what a client sends at connect
// does not.
func TestCarriesUnrelated(t *testing.T) {
	for method, want := range map[string]bool{
		"tools/call": true, "tools/list": false, "initialize": false, "ping": false,
		"resources/list": false, "resources/read": true, "prompts/get": true, "prompts/list": false,
		"completion/complete": false, "": false,
	} {
		if got := CarriesUnrelated(method); got != want {
			t.Errorf("CarriesUnrelated(%q) = %v, want %v", method, got, want)
		}
	}
}
