package front2026

import (
	"encoding/json"
	"testing"

	"github.com/taskgate/taskgate/internal/mcpwire"
)

// TestDeclaresTasksMemo: the remembered answer is the decode's, whatever
// the order of the capabilities seen.
func TestDeclaresTasksMemo(t *testing.T) {
	caps := []string{`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`, `{}`, `{"extensions":{"io.modelcontextprotocol/tasks":true}}`,
		`{"Extensions":{"io.modelcontextprotocol/tasks":{}}}`, `{"extensions":5}`, `[]`, `{"extensions":{"io.modelcontextprotocol/tasks":{"a":1}}}`}
	for i := 0; i < 3; i++ {
		for _, c := range caps {
			for j := 0; j < 2; j++ {
				if got, want := declaresTasks(json.RawMessage(c)), declaresTasksDecode(json.RawMessage(c)); got != want {
					t.Errorf("declaresTasks(%s) = %v, want %v", c, got, want)
				}
			}
		}
	}
}

// BenchmarkFastpathScalars: the id, version and capabilities shortcuts
// against the decodes they skip.
func BenchmarkFastpathScalars(b *testing.B) {
	id, ver := []byte(`12345`), json.RawMessage(`"2026-07-28"`)
	caps := json.RawMessage(`{"extensions":{"io.modelcontextprotocol/tasks":{}},"elicitation":{}}`)
	var n json.Number
	var s string
	b.Run("id/decode", func(b *testing.B) {
		for b.Loop() {
			_ = json.Unmarshal(id, &n)
		}
	})
	b.Run("id/isNumber", func(b *testing.B) {
		for b.Loop() {
			_ = mcpwire.IsNumber(id)
		}
	})
	b.Run("version/decode", func(b *testing.B) {
		for b.Loop() {
			_ = json.Unmarshal(ver, &s)
		}
	})
	b.Run("version/plainString", func(b *testing.B) {
		for b.Loop() {
			_ = mcpwire.PlainString(ver, &s)
		}
	})
	b.Run("caps/decode", func(b *testing.B) {
		for b.Loop() {
			_ = declaresTasksDecode(caps)
		}
	})
	b.Run("caps/memo", func(b *testing.B) {
		for b.Loop() {
			_ = declaresTasks(caps)
		}
	})
}
