// Command hog is a stdio MCP server for the budget tests: its tools are
// echo, grow (allocates and touches memory without end, in the
// background), growhold (grow, never answering: a call in flight while
// the child grows), spin (a busy loop without end, in the background) and open (opens /dev/null n times, keeping each open, and
// says how many it could).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

func main() {
	out := json.NewEncoder(os.Stdout)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var files []*os.File
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
				Name            string `json:"name"`
				Arguments       struct {
					N    int    `json:"n"`
					Text string `json:"text"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil {
			continue
		}
		var result any
		switch m.Method {
		case "initialize":
			result = map[string]any{"protocolVersion": m.Params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "hog", "version": "1"}}
		case "tools/list":
			var tools []any
			for _, name := range []string{"echo", "grow", "growhold", "spin", "open"} {
				tools = append(tools, map[string]any{"name": name, "inputSchema": map[string]any{"type": "object"}})
			}
			result = map[string]any{"tools": tools}
		case "tools/call":
			text := ""
			switch m.Params.Name {
			case "echo":
				text = m.Params.Arguments.Text
			case "grow":
				go grow()
				text = "growing"
			case "growhold":
				go grow()
				continue
			case "spin":
				go func() {
					for x := 0; ; x++ {
						_ = x * x
					}
				}()
				text = "spinning"
			case "open":
				var err error
				for i := 0; i < m.Params.Arguments.N; i++ {
					var f *os.File
					if f, err = os.Open("/dev/null"); err != nil {
						break
					}
					files = append(files, f)
				}
				text = fmt.Sprintf("%d open", len(files))
				if err != nil {
					text += ": " + err.Error()
				}
			}
			result = map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}
		default:
			_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "Method not found"}})
			continue
		}
		_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})
	}
}

// grow allocates and touches memory without end.
func grow() {
	var held [][]byte
	for {
		b := make([]byte, 8<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		held = append(held, b)
		time.Sleep(10 * time.Millisecond)
	}
}
