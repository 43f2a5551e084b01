package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/taskgate/taskgate/internal/redistest"
	"github.com/taskgate/taskgate/internal/testupstream"
	"github.com/taskgate/taskgate/taskstore"
)

// TestConsoleDeliveriesBrowser drives the console's deliveries page in
// headless Chromium: a webhook dead letter of a real task (written through
// the taskstore API on the gateway's redis-server, as the dispatcher
// writes one: enqueue, claim, dead) is shown with its event, task link,
// last error and data; Retry puts it back in the queue, and the page says
// it is queued (the flash, 1 waiting, no dead letter), as does the store.
// With UPDATE_SCREENSHOTS=1 it saves docs/console-deliveries.png.
func TestConsoleDeliveriesBrowser(t *testing.T) {
	browser := chromium(t)
	t.Parallel()
	up := newUpstream(t, testupstream.Options{})
	raddr := redistest.Start(t)
	caddr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, up, append(slices.Clone(twoReplicaFlags), "--redis-url", "redis://"+raddr, "--console-listen", caddr)...)
	console := "http://" + caddr
	mc := newMClient(t, []string{gw.URL}, "Bearer deliveries-client", true)
	waiting := mc.createTask(0, "elicit", map[string]any{}).TaskID
	mc.waitStatus(0, waiting, "input_required")

	// The dead letter, as the dispatcher would leave it after its retry
	// window, on the gateway's own Redis.
	rdb := redis.NewClient(&redis.Options{Addr: raddr})
	t.Cleanup(func() { rdb.Close() })
	st := taskstore.New(rdb, taskstore.Options{})
	t.Cleanup(func() { st.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const ep = "chat-ops"
	ev := "evt_" + waiting + "_2"
	// The payload's shape is the webhook package's (Standard Webhooks'
	// envelope); the page shows an excerpt of its data.
	now := time.Now().UTC().Truncate(time.Second)
	payload, _ := json.Marshal(map[string]any{"type": "task.input_required", "timestamp": now,
		"data": map[string]any{"eventId": ev, "taskId": waiting, "tool": "elicit", "status": "input_required",
			"principal": "auth:3f2a9c01be42", "attempt": 1,
			"input":      map[string]any{"method": "elicitation/create", "message": "What is your name?"},
			"consoleUrl": console + "/tasks/" + waiting}})
	if ok, err := st.EnqueueDelivery(ctx, taskstore.Delivery{EventID: ev, Endpoint: ep, TaskID: waiting, Type: "task.input_required",
		Payload: payload}, 48*time.Hour); err != nil || !ok {
		t.Fatalf("EnqueueDelivery: %t %v", ok, err)
	}
	// Six attempts: five retried, the last one dead.
	for i := range 6 {
		if ds, err := st.ClaimDeliveries(ctx, ep, 10, time.Minute); err != nil || len(ds) != 1 {
			t.Fatalf("ClaimDeliveries %d: %v %v", i, ds, err)
		}
		if i < 5 {
			if err := st.DeliveryRetry(ctx, ep, ev, time.Now(), "HTTP 500 from the receiver"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := st.DeliveryDead(ctx, ep, ev, "HTTP 500 from the receiver, 24h0m0s of retries spent"); err != nil {
		t.Fatal(err)
	}

	bctx, closeBrowser := startChromium(ctx, browser, 1280, 640)
	defer closeBrowser()
	// The page, from the nav link.
	if err := chromedp.Do(bctx, chromedp.Navigate(console+"/"), chromedp.WaitVisible(chromedp.CSS(`nav a[href="/deliveries"]`)),
		chromedp.Click(chromedp.CSS(`nav a[href="/deliveries"]`)), chromedp.WaitVisible(chromedp.CSS("table.dead-letters"))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(`table.dead-letters a[href="/tasks/`+waiting+`"]`))); err != nil {
		t.Fatalf("no link to the task: %v", err)
	}
	text := mainText(t, bctx)
	for _, want := range []string{ep, "0 waiting", "1 dead letter", ev, "task.input_required", waiting, "HTTP 500 from the receiver", "What is your name?", "6"} {
		if !strings.Contains(text, want) {
			t.Errorf("the deliveries page lacks %q:\n%s", want, text)
		}
	}
	screenshotter(t, bctx)("console-deliveries.png")
	// Retry: the page comes back saying it is queued.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`table.dead-letters button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("flash"))); err != nil {
		t.Fatalf("retry: %v", err)
	}
	text = mainText(t, bctx)
	for _, want := range []string{ev + " to " + ep + " is queued again", "1 waiting", "0 dead letters"} {
		if !strings.Contains(text, want) {
			t.Errorf("after the retry the page lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "HTTP 500 from the receiver") {
		t.Errorf("after the retry the dead letter is still shown:\n%s", text)
	}
	if due, dead, err := st.WebhookQueueStats(ctx, ep); err != nil || due != 1 || dead != 0 {
		t.Errorf("after the retry the queue has %d due, %d dead (%v), want 1 and 0", due, dead, err)
	}
}
