package webhook

import (
	"errors"
	"strings"
	"testing"
)

func TestParseFile(t *testing.T) {
	data := `{"endpoints": [
  {"name": "chat", "url": "https://hooks.example.com/t", "secrets": ["` + testSecret + `"], "events": ["task.input_required"]},
  {"name": "ci", "url": "http://127.0.0.1:9000/", "secrets": ["` + testSecret + `"], "tools": ["deploy_*"]}
]}`
	eps, err := ParseFile("webhooks.json", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 2 || eps[0].Name != "chat" || eps[1].Tools[0] != "deploy_*" || eps[0].Events[0] != EventInputRequired {
		t.Fatalf("got %+v", eps)
	}
}

func TestParseFileErrors(t *testing.T) {
	ep := `{"name": "chat", "url": "https://h/t", "secrets": ["` + testSecret + `"]}`
	cases := []struct{ data, want string }{
		{``, "w.json: empty: want a JSON object"},
		{`{"endpoints": [` + "\n" + `{"name": "x",}]}`, "w.json:2:14: invalid character '}'"},
		{`{"endpoint": []}`, `w.json: unknown field "endpoint" (want {"endpoints": [...]})`},
		{`{}`, `w.json: the file must be {"endpoints": [...]}`},
		{`{"endpoints": []} x`, "w.json:1:19: unexpected data after the top-level object"},
		{`[]`, "w.json:1:2: want a JSON object, got a JSON array"},
		{`{"endpoints": [` + ep + `, {"name": "b", "url": "https://h/t", "secrets": ["` + testSecret + `"], "event": []}]}`, `w.json: endpoint 2: unknown field "event" (want name, url`},
		{`{"endpoints": [` + ep + `, {"name": "b", "url": "https://h/t", "secrets": "` + testSecret + `"}]}`, `w.json: endpoint 2: secrets: want a list, got a JSON string`},
		{`{"endpoints": [` + ep + `, ` + ep + `]}`, `w.json: endpoint 2 ("chat"): name: endpoint 1 has the same name`},
		{`{"endpoints": [{"name": "b", "url": "https://h/t", "secrets": ["whsec_abc"]}]}`, `w.json: endpoint 1 ("b"): secrets[0]: the part after whsec_ is not standard base64`},
		{`{"endpoints": [{"name": "b", "url": "mailto:x", "secrets": ["` + testSecret + `"]}]}`, `w.json: endpoint 1 ("b"): url: "mailto:x": want an http`},
	}
	for _, c := range cases {
		_, err := ParseFile("w.json", []byte(c.data))
		var fe *FileError
		if !errors.As(err, &fe) {
			t.Errorf("%s: got %v (%T), want a *FileError", c.data, err, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %s…", c.data, err, c.want)
		}
	}
}

// FuzzParseFile: any input gets endpoints that pass Check, or a
// *FileError that never repeats a secret's base64.
func FuzzParseFile(f *testing.F) {
	f.Add([]byte(`{"endpoints": [{"name": "chat", "url": "https://h/t", "secrets": ["` + testSecret + `"], "events": ["task.failed"], "tools": ["a*"]}]}`))
	f.Add([]byte(`{"endpoints": [{"name": "x", "url": "http://[::1]:80/", "secrets": ["whsec_c2VjcmV0"]}]}`))
	f.Add([]byte(`{"endpoints": null}`))
	f.Add([]byte(`{"endpoints": [1, {}]}`))
	f.Add([]byte("\xff{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		eps, err := ParseFile("f.json", data)
		if err != nil {
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("%T: %v", err, err)
			}
			return
		}
		if err := CheckEndpoints(eps); err != nil {
			t.Fatalf("ParseFile accepted what CheckEndpoints refuses: %v", err)
		}
	})
}
