package taskstore

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

func webhookStore(t *testing.T, e *env) *Store {
	return e.store(t, func(o *Options) { o.Webhooks = true })
}

// outboxEvents reads (without a consumer group) what the owner's outbox
// holds, oldest first.
func outboxEvents(t *testing.T, e *env, s *Store, owner string) []WebhookEvent {
	t.Helper()
	xs, err := e.rdb.XRange(ctx, s.k.outbox(owner), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var evs []WebhookEvent
	for _, x := range xs {
		f := map[string]string{}
		for k, v := range x.Values {
			f[k], _ = v.(string)
		}
		evs = append(evs, decodeEvent(s.k.outbox(owner), x.ID, f))
	}
	return evs
}

func eventTypes(evs []WebhookEvent) []string {
	var ts []string
	for _, ev := range evs {
		ts = append(ts, ev.Type)
	}
	return ts
}

func wantTypes(t *testing.T, evs []WebhookEvent, types ...string) {
	t.Helper()
	if fmt.Sprint(eventTypes(evs)) != fmt.Sprint(types) {
		t.Fatalf("events %v, want %v", eventTypes(evs), types)
	}
}

// TestWebhookEventsRecorded: each status change records exactly one event
// of its type, with the task's fields and the change's own (input request,
// outcome), ids counted per task; answers (back to working) record none.
func TestWebhookEventsRecorded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := webhookStore(t, e)
		notified := make(chan struct{}, 1)
		stop, err := s.WatchWebhookEvents(ctx, notified)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		<-notified // the subscription is live
		created := e.clock.Now()
		task, err := s.Create(ctx, NewTask{Owner: "alice", Tool: "deploy", StatusMessage: "starting", Trace: "00-abc-01"})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-notified:
		case <-time.After(5 * time.Second):
			t.Fatal("no notice of the event")
		}
		e.clock.Advance(time.Second)
		req := InputRequest{Method: "elicitation/create", Params: json.RawMessage(`{"message":"Approve the deploy?","requestedSchema":{}}`)}
		wantErr(t, s.AddInputRequests(ctx, "alice", task.ID, map[string]InputRequest{"b": {Method: "sampling/createMessage"}, "a": req}, "needs approval", "w1"), nil)
		// A retried write that landed records nothing more.
		wantErr(t, s.AddInputRequests(ctx, "alice", task.ID, map[string]InputRequest{"b": {Method: "sampling/createMessage"}, "a": req}, "needs approval", "w1"), nil)
		if _, err := s.AnswerInputs(ctx, "alice", task.ID, map[string]json.RawMessage{"a": json.RawMessage(`{}`), "b": json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Second)
		result := json.RawMessage(`{"content":[],"isError":true}`)
		wantErr(t, s.Finish(ctx, "alice", task.ID, StatusCompleted, Outcome{Result: result, WriteID: "f1"}), nil)
		wantErr(t, s.Finish(ctx, "alice", task.ID, StatusCompleted, Outcome{Result: result, WriteID: "f1"}), nil) // replay

		evs := outboxEvents(t, e, s, "alice")
		wantTypes(t, evs, WebhookTaskCreated, WebhookTaskInputRequired, WebhookTaskCompleted)
		for i, ev := range evs {
			if ev.ID != fmt.Sprintf("evt_%s_%d", task.ID, i+1) || ev.TaskID != task.ID || ev.Owner != "alice" ||
				ev.Tool != "deploy" || ev.TraceParent != "00-abc-01" || !ev.CreatedAt.Equal(created) || ev.Attempt != 1 {
				t.Errorf("event %d = %+v", i, ev)
			}
		}
		if c := evs[0]; c.Status != "working" || c.StatusMessage != "starting" || !c.At.Equal(created) {
			t.Errorf("created = %+v", c)
		}
		if in := evs[1]; in.Status != "input_required" || in.StatusMessage != "needs approval" ||
			in.InputMethod != "elicitation/create" || in.InputMessage != "Approve the deploy?" || !in.At.Equal(created.Add(time.Second)) {
			t.Errorf("input_required = %+v", in)
		}
		if done := evs[2]; done.Status != "completed" || done.ResultBytes != len(result) || !done.IsError || done.StatusMessage != "" {
			t.Errorf("completed = %+v", done)
		}
		if !e.isSetMember(s.k.outboxes(), s.k.outbox("alice")) {
			t.Error("the outbox is not in the hint")
		}
	})
}

// TestWebhookEventsOtherOutcomes: failed, cancelled (client and console),
// a rerun, and a status set directly; refused changes record nothing.
func TestWebhookEventsOtherOutcomes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := webhookStore(t, e)
		failed := mustCreate(t, s, "o")
		wantErr(t, s.Fail(ctx, "o", failed.ID, Outcome{Error: json.RawMessage(`{"code":-32000,"message":"boom"}`)}), nil)
		cancelled := mustCreate(t, s, "o")
		if _, err := s.RequestCancel(ctx, "o", cancelled.ID, "stop"); err != nil {
			t.Fatal(err)
		}
		byOps := mustCreate(t, s, "o")
		if _, err := s.OpsCancel(ctx, "o", byOps.ID, "operator"); err != nil {
			t.Fatal(err)
		}
		rerun := createRerunnable(t, s, "r1")
		if _, err := s.BeginAttempt(ctx, "o", rerun.ID, AttemptRequest{Holder: "r1", Lease: time.Minute, Max: 3, Cause: "upstream_error"}); err != nil {
			t.Fatal(err)
		}
		direct := mustCreate(t, s, "o")
		wantErr(t, s.transition(ctx, "o", direct.ID, StatusInputRequired, ""), nil)
		wantErr(t, s.transition(ctx, "o", direct.ID, StatusWorking, ""), nil) // no event type
		wantErr(t, s.transition(ctx, "o", direct.ID, StatusCompleted, ""), nil)

		// Refused: terminal, another owner, a finish past the cancel.
		before := len(outboxEvents(t, e, s, "o"))
		_, err := s.RequestCancel(ctx, "o", failed.ID, "")
		wantErr(t, err, ErrTerminal)
		wantErr(t, s.Complete(ctx, "o", cancelled.ID, json.RawMessage(`{}`)), ErrTerminal)
		wantErr(t, s.Complete(ctx, "mallory", rerun.ID, json.RawMessage(`{}`)), ErrNotFound)
		wantErr(t, s.AddInputRequests(ctx, "o", failed.ID, map[string]InputRequest{"k": {Method: "x"}}, "", ""), ErrTerminal)
		wantErr(t, s.transition(ctx, "o", direct.ID, StatusFailed, ""), ErrTerminal)
		evs := outboxEvents(t, e, s, "o")
		if len(evs) != before {
			t.Fatalf("refused changes recorded %v", eventTypes(evs[before:]))
		}
		if e.exists(s.k.outbox("mallory")) {
			t.Error("a refused change recorded an event in the caller's outbox")
		}

		byTask := map[string][]WebhookEvent{}
		for _, ev := range evs {
			byTask[ev.TaskID] = append(byTask[ev.TaskID], ev)
		}
		wantTypes(t, byTask[failed.ID], WebhookTaskCreated, WebhookTaskFailed)
		if f := byTask[failed.ID][1]; !f.IsError || f.ResultBytes != 32 {
			t.Errorf("failed = %+v", f)
		}
		wantTypes(t, byTask[cancelled.ID], WebhookTaskCreated, WebhookTaskCancelled)
		if c := byTask[cancelled.ID][1]; c.StatusMessage != "stop" || c.Status != "cancelled" {
			t.Errorf("cancelled = %+v", c)
		}
		wantTypes(t, byTask[byOps.ID], WebhookTaskCreated, WebhookTaskCancelled)
		wantTypes(t, byTask[rerun.ID], WebhookTaskCreated, WebhookTaskRerun)
		if r := byTask[rerun.ID][1]; r.Attempt != 2 || r.Status != "working" {
			t.Errorf("rerun = %+v", r)
		}
		wantTypes(t, byTask[direct.ID], WebhookTaskCreated, WebhookTaskInputRequired, WebhookTaskCompleted)
	})
}

// TestWebhooksOff: without Options.Webhooks no script records an event.
func TestWebhooksOff(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		task := mustCreate(t, s, "o")
		wantErr(t, s.AddInputRequests(ctx, "o", task.ID, map[string]InputRequest{"k": {Method: "x"}}, "", ""), nil)
		wantErr(t, s.Complete(ctx, "o", task.ID, json.RawMessage(`{}`)), nil)
		if e.exists(s.k.outbox("o")) || e.exists(s.k.outboxes()) {
			t.Error("events recorded with webhooks off")
		}
		if _, ok := e.hash(s.k.task("o", task.ID))["whseq"]; ok {
			t.Error("event counter kept with webhooks off")
		}
	})
}

// TestEveryStatusChangeRecordsAnEvent reads the package's Lua: every
// script that writes a task's status must call whEmit in the same script
// (one atomic step), except the one that goes back to working after the
// last answer, which is no event type. A new status-changing script that
// forgets the outbox fails here.
func TestEveryStatusChangeRecordsAnEvent(t *testing.T) {
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	script := regexp.MustCompile("(?s)var (\\w+) = redis\\.NewScript\\(([^`]*)`(.*?)`\\)")
	writesStatus := regexp.MustCompile(`'status', (to|'\w+'|status)`)
	exempt := map[string]bool{"answerInputsCmd": true}
	found := map[string]bool{}
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".go") || strings.HasSuffix(f.Name(), "_test.go") {
			continue
		}
		src, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range script.FindAllStringSubmatch(string(src), -1) {
			name, body := m[1], m[3]
			// createCmd writes the status among the fields it is given.
			if !writesStatus.MatchString(body) && name != "createCmd" || exempt[name] {
				continue
			}
			found[name] = true
			defined := strings.Contains(m[2], "luaPrologue") || strings.Contains(m[2], "luaWebhook")
			if !strings.Contains(body, "whEmit(") || !defined {
				t.Errorf("%s (%s) writes a status without recording a webhook event", name, f.Name())
			}
		}
	}
	for _, want := range []string{"createCmd", "transitionCmd", "finishCmd", "cancelCmd", "addInputsCmd", "beginAttemptCmd"} {
		if !found[want] {
			t.Errorf("%s not found among the status-changing scripts", want)
		}
	}
}

func (e *env) isSetMember(set, member string) bool {
	e.t.Helper()
	ok, err := e.rdb.SIsMember(ctx, set, member).Result()
	if err != nil {
		e.t.Fatal(err)
	}
	return ok
}
