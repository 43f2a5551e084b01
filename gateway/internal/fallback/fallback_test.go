package fallback

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/taskgate/taskgate/taskstore"
)

// TestFallbackNeverHidesUpstreamTools: a tool of the upstream with a
// fallback tool's name stays, and the fallback one is left out.
func TestFallbackNeverHidesUpstreamTools(t *testing.T) {
	fb, err := New(Config{Enabled: true}, nil, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	out, err := fb.AppendTools(json.RawMessage(`{"tools":[{"name":"taskgate_task_status","description":"mine"}],"nextCursor":"c"}`))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Tools []struct {
			Name, Description string
		} `json:"tools"`
		NextCursor string `json:"nextCursor"`
	}
	_ = json.Unmarshal(out, &res)
	n := 0
	for _, tl := range res.Tools {
		if tl.Name == "taskgate_task_status" {
			n++
			if tl.Description != "mine" {
				t.Errorf("the upstream's tool was replaced: %+v", tl)
			}
		}
	}
	if n != 1 || len(res.Tools) != 4 || res.NextCursor != "c" {
		t.Fatalf("tools: %s", out)
	}
	if _, err := ToolNames("bad prefix "); err == nil {
		t.Fatal("a prefix with spaces was accepted")
	}
	if names, err := ToolNames("tg."); err != nil || names[0] != "tg.task_status" {
		t.Fatalf("prefix tg.: %v %v", names, err)
	}
}

func TestFallbackStatusTextUnicode(t *testing.T) {
	fb, _ := New(Config{Enabled: true}, nil, nil, zerolog.Nop())
	res := fb.StatusResult(&taskstore.Task{ID: "t1", Tool: "x", Status: taskstore.StatusWorking, StatusMessage: "état: 正在"})
	if !strings.Contains(string(res), "État: 正在.") || !utf8.Valid(res) {
		t.Fatalf("status: %s", res)
	}
}
