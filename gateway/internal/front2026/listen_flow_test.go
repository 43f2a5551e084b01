package front2026

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/gateway/internal/core"
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
	"github.com/taskgate/taskgate/gateway/internal/gwtest/frontrig"
	"github.com/taskgate/taskgate/gateway/internal/upstreamside"
	"github.com/taskgate/taskgate/internal/mcpwire"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

// TestListenListChangedEveryEra: the go-sdk client at its default version
// (2026-07-28) with a ToolListChangedHandler opens subscriptions/listen
// while it connects. Through the gateway it connects, in front of a session
// upstream as of a stateless one, and hears the upstream's tool list change
// (in front of a session upstream the gateway bridges the owner session's
// GET stream into the listen stream).
func TestListenListChangedEveryEra(t *testing.T) {
	for _, era := range upstreamEras {
		t.Run(era.Name, func(t *testing.T) {
			srv := httptest.NewServer(testupstream.Handler(testupstream.Options{Stateless: era.Stateless, ListChanged: true}))
			t.Cleanup(srv.Close)
			gw := newReplicas(t, srv.URL+"/mcp", 1, nil).urls[0]
			changed := make(chan struct{}, 8)
			client := mcp.NewClient(&mcp.Implementation{Name: "sdk", Version: "1"}, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
					changed <- struct{}{}
				},
			})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a hang guard
			defer cancel()
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gw, MaxRetries: -1}, nil)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			if v := cs.InitializeResult().ProtocolVersion; v != core.Version2026 {
				t.Fatalf("negotiated %q, want %s", v, core.Version2026)
			}
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "grow"}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatal("no notifications/tools/list_changed reached the client")
			}
			res, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, tool := range res.Tools {
				found = found || tool.Name == testupstream.GrownTool
			}
			if !found {
				t.Errorf("tools/list after the change has no %s", testupstream.GrownTool)
			}
		})
	}
}

// listenAck opens a subscriptions/listen stream with filter and returns
// its first event's params (the acknowledgement) and the response, whose
// headers must come at once.
func listenAck(t *testing.T, url string, filter map[string]any) (json.RawMessage, *http.Response) {
	t.Helper()
	resp := gwtest.MPost(t, url, "subscriptions/listen", map[string]any{"notifications": filter}, gwtest.ModernMeta(), nil)
	if resp.StatusCode != http.StatusOK || !upstreamside.IsStream(resp) {
		t.Fatalf("listen: HTTP %d %s, want an event stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ev, err := mcpwire.NewReader(resp.Body, 1<<20).Next()
	if err != nil {
		t.Fatalf("listen: no first event: %v", err)
	}
	var n struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(ev.Data, &n) != nil || n.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first event %s, want the acknowledgement", ev.Data)
	}
	return n.Params, resp
}

// TestListenSessionUpstreamGrants: in front of a session upstream, a
// listen is acknowledged at once with what the upstream offers: tools list
// changes (it has tools), not prompts (it has none), the resource it
// accepts a subscription to; and still acknowledged (granting nothing of
// the upstream's) when the upstream has no GET stream to give.
func TestListenSessionUpstreamGrants(t *testing.T) {
	filter := map[string]any{"toolsListChanged": true, "promptsListChanged": true, "resourceSubscriptions": []string{testupstream.NoteURI}}
	t.Run("offered", func(t *testing.T) {
		srv := httptest.NewServer(testupstream.Handler(testupstream.Options{Notify: true}))
		t.Cleanup(srv.Close)
		gw := newReplicas(t, srv.URL+"/mcp", 1, nil).urls[0]
		params, _ := listenAck(t, gw, filter)
		var p struct {
			Notifications map[string]any `json:"notifications"`
			Meta          map[string]any `json:"_meta"`
		}
		_ = json.Unmarshal(params, &p)
		if p.Notifications["toolsListChanged"] != true || p.Notifications["promptsListChanged"] != nil {
			t.Errorf("granted %v, want toolsListChanged only of the list changes", p.Notifications)
		}
		if subs, _ := p.Notifications["resourceSubscriptions"].([]any); len(subs) != 1 || subs[0] != testupstream.NoteURI {
			t.Errorf("granted subscriptions %v, want [%s]", p.Notifications["resourceSubscriptions"], testupstream.NoteURI)
		}
		if p.Meta[subscriptionIDKey] != float64(7) {
			t.Errorf("_meta %v, want the subscription id 7", p.Meta)
		}
	})
	t.Run("no-get-stream", func(t *testing.T) {
		up := testupstream.Handler(testupstream.Options{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				w.WriteHeader(http.StatusMethodNotAllowed)
				return
			}
			up.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		gw := newReplicas(t, srv.URL+"/mcp", 1, nil).urls[0]
		params, _ := listenAck(t, gw, filter)
		var p struct {
			Notifications map[string]any `json:"notifications"`
		}
		_ = json.Unmarshal(params, &p)
		if p.Notifications["promptsListChanged"] != nil || p.Notifications["resourceSubscriptions"] != nil {
			t.Errorf("granted %v, want nothing the upstream lacks", p.Notifications)
		}
	})
}

// TestListenResourceUpdated: a resource update on the owner session
// reaches the listen stream that subscribed to it, tagged with its
// subscription id.
func TestListenResourceUpdated(t *testing.T) {
	srv := httptest.NewServer(testupstream.Handler(testupstream.Options{Notify: true}))
	t.Cleanup(srv.Close)
	gw := newReplicas(t, srv.URL+"/mcp", 1, nil).urls[0]
	_, resp := listenAck(t, gw, map[string]any{"resourceSubscriptions": []string{testupstream.NoteURI}})
	events := make(chan []byte, 8)
	go func() {
		defer close(events)
		sr := mcpwire.NewReader(resp.Body, 1<<20)
		for {
			ev, err := sr.Next()
			if err != nil {
				return
			}
			events <- ev.Data
		}
	}()
	deadline := time.After(20 * time.Second) // a hang guard
	for {
		// Touch until an update comes: the feed's GET stream opens after
		// the acknowledgement, and an update before it is not delivered.
		r := gwtest.MPost(t, gw, "tools/call", map[string]any{"name": "touch", "arguments": map[string]any{}}, gwtest.ModernMeta(), nil)
		var res struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		gwtest.OKResult(t, r, &res)
		select {
		case data, ok := <-events:
			if !ok {
				t.Fatal("the listen stream ended")
			}
			var n struct {
				Method string `json:"method"`
				Params struct {
					URI  string         `json:"uri"`
					Meta map[string]any `json:"_meta"`
				} `json:"params"`
			}
			_ = json.Unmarshal(data, &n)
			if n.Method != "notifications/resources/updated" || n.Params.URI != testupstream.NoteURI || n.Params.Meta[subscriptionIDKey] != float64(7) {
				t.Fatalf("event %s, want the note's update with subscription id 7", data)
			}
			return
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("no notifications/resources/updated")
		}
	}
}

// TestListenSharedAcrossReplicas: two replicas serve listen streams of one
// owner. The upstream gives its owner session one GET stream (a second is
// refused 409): the replica holding it shares what it reads through the
// store, and both streams hear the tool list change.
func TestListenSharedAcrossReplicas(t *testing.T) {
	srv := httptest.NewServer(testupstream.Handler(testupstream.Options{ListChanged: true}))
	t.Cleanup(srv.Close)
	rp := newReplicas(t, srv.URL+"/mcp", 2, nil)
	heard := make(chan int, 64)
	for i, url := range rp.urls {
		_, resp := listenAck(t, url, map[string]any{"toolsListChanged": true})
		go func() {
			sr := mcpwire.NewReader(resp.Body, 1<<20)
			for {
				ev, err := sr.Next()
				if err != nil {
					return
				}
				if json.Valid(ev.Data) && strings.Contains(string(ev.Data), `"notifications/tools/list_changed"`) {
					heard <- i
				}
			}
		}()
	}
	got := map[int]bool{}
	deadline := time.After(9 * time.Second) // a hang guard (gwtest.MPost's streams end at 10 s)
	for len(got) < 2 {
		var res json.RawMessage
		gwtest.OKResult(t, gwtest.MPost(t, rp.urls[0], "tools/call", map[string]any{"name": "grow", "arguments": map[string]any{}}, gwtest.ModernMeta(), nil), &res)
		wait := time.After(200 * time.Millisecond)
	drain:
		for {
			select {
			case i := <-heard:
				got[i] = true
			case <-wait:
				break drain
			case <-deadline:
				t.Fatalf("list change heard on replicas %v, want both", got)
			}
		}
	}
}

// TestListenUpstreamDown: a session upstream that cannot open the owner
// session: a listen with taskIds is still acknowledged, granting the tasks
// part and none of the upstream's.
func TestListenUpstreamDown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&m)
		if m.Method == "server/discover" { // a session server's answer: the era is known
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"no"}}`))
			return
		}
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	gw := newReplicas(t, srv.URL+"/mcp", 1, nil).urls[0]
	meta := gwtest.ModernMeta()
	meta[core.MetaClientCaps] = map[string]any{"extensions": map[string]any{core.TasksExtension: map[string]any{}}}
	resp := gwtest.MPost(t, gw, "subscriptions/listen", map[string]any{"notifications": map[string]any{"toolsListChanged": true, "taskIds": []string{}}}, meta, nil)
	if resp.StatusCode != http.StatusOK || !upstreamside.IsStream(resp) {
		t.Fatalf("listen: HTTP %d, want the stream", resp.StatusCode)
	}
	ev, err := mcpwire.NewReader(resp.Body, 1<<20).Next()
	if err != nil || !strings.Contains(string(ev.Data), `"notifications":{"taskIds":[]}`) {
		t.Fatalf("first event %s (%v), want the acknowledgement granting taskIds only", ev.Data, err)
	}
}

// TestListenKeepAlive: a quiet listen stream carries an SSE comment every
// Config.KeepAlive.
func TestListenKeepAlive(t *testing.T) {
	srv := httptest.NewServer(testupstream.Handler(testupstream.Options{}))
	t.Cleanup(srv.Close)
	up, err := upstream.New(srv.URL+"/mcp", upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	store := taskstore.New(rdb, taskstore.Options{})
	t.Cleanup(func() { store.Close() })
	gw := httptest.NewServer(serveFront(frontrig.New(t, frontrig.Config{Upstream: up, Store: store, KeepAlive: 20 * time.Millisecond})))
	t.Cleanup(gw.Close)
	_, resp := listenAck(t, gw.URL+"/mcp", map[string]any{"toolsListChanged": true})
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("no keep-alive comment before the stream ended: %v", err)
		}
		if strings.HasPrefix(line, ":") {
			return
		}
	}
}
