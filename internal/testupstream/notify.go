package testupstream

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// NoteURI is the resource of Options.Notify that clients may subscribe to;
// the touch tool announces it updated.
const NoteURI = "test://note"

// The Notify option: the logging capability, a subscribable resource
// (NoteURI), and two tools that use them:
//
//	log    logs {"text"} at debug, info and error, then returns "logged"
//	       (a client sees the messages at or above the level it set)
//	touch  announces NoteURI updated to its subscribers, then returns
//	       "touched"
type logIn struct {
	Text string `json:"text,omitempty" jsonschema:"what to log"`
}

func notifyOptions(o *mcp.ServerOptions) {
	o.Capabilities.Logging = &mcp.LoggingCapabilities{}
	o.SubscribeHandler = func(context.Context, *mcp.SubscribeRequest) error { return nil }
	o.UnsubscribeHandler = func(context.Context, *mcp.UnsubscribeRequest) error { return nil }
}

func addNotify(s *mcp.Server, rec *Recorder) {
	s.AddResource(&mcp.Resource{URI: NoteURI, Name: "note", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: NoteURI, MIMEType: "text/plain", Text: "a note"}}}, nil
		})
	add(s, rec, &mcp.Tool{Name: "log", Description: "Logs its text at debug, info and error, then returns."},
		func(ctx context.Context, req *mcp.CallToolRequest, in logIn) (*mcp.CallToolResult, error) {
			for _, level := range []mcp.LoggingLevel{"debug", "info", "error"} {
				//lint:ignore SA1019 logging is deprecated in 2026-07-28 but still served; the test upstream exercises it
				if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: level, Logger: "testupstream", Data: fmt.Sprintf("%s: %s", level, in.Text)}); err != nil {
					return nil, err
				}
			}
			return text("logged"), nil
		})
	add(s, rec, &mcp.Tool{Name: "touch", Description: "Announces the note resource updated."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, error) {
			if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: NoteURI}); err != nil {
				return nil, err
			}
			return text("touched"), nil
		})
}

// GrownTool is the tool the grow tool of Options.ListChanged adds.
const GrownTool = "grown"

// addGrow registers grow: it adds GrownTool (again, if it is there),
// which the go-sdk announces to every session with
// notifications/tools/list_changed, then returns "grown".
func addGrow(s *mcp.Server, rec *Recorder) {
	add(s, rec, &mcp.Tool{Name: "grow", Description: "Adds the grown tool, changing the tool list."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, error) {
			add(s, rec, &mcp.Tool{Name: GrownTool, Description: "Added by grow."},
				func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, error) {
					return text("grown"), nil
				})
			return text("grown"), nil
		})
}
