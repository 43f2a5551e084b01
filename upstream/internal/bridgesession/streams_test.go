package bridgesession

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestHeldReleasedToANewStream(t *testing.T) {
	var mu sync.Mutex
	var s Streams[int]
	refused := make(chan string, MaxHeld+1)
	refuse := func(h *Held[int], why string) { refused <- fmt.Sprint(h.Key, h.Ask, why) }
	mu.Lock()
	for i := range MaxHeld {
		if held, why := s.HoldLocked(&mu, time.Hour, fmt.Sprint(i), i, []byte(fmt.Sprint(i)), refuse); !held {
			t.Fatalf("request %d not held: %s", i, why)
		}
	}
	if held, why := s.HoldLocked(&mu, time.Hour, "x", 0, nil, refuse); held || why != "32 requests already wait for the client to open a stream" {
		t.Fatalf("over MaxHeld: held %v, %q", held, why)
	}
	ch := s.openLocked()
	if s.HeldLocked() != 0 || s.NoneOpenLocked() || len(ch) != MaxHeld {
		t.Fatalf("held %d, stream took %d", s.HeldLocked(), len(ch))
	}
	if !s.SendLocked([]byte("n")) {
		t.Fatal("an open stream did not take a message")
	}
	s.CloseLocked()
	mu.Unlock()
	n := 0
	for range ch {
		n++
	}
	if n != MaxHeld+1 {
		t.Fatalf("the stream carried %d messages", n)
	}
	if s.openLocked() != nil {
		t.Fatal("a closed session opened a stream")
	}
	if len(refused) != 0 {
		t.Fatalf("released requests refused: %s", <-refused)
	}
}

func TestHeldExpires(t *testing.T) {
	var mu sync.Mutex
	var s Streams[string]
	refused := make(chan string, 1)
	mu.Lock()
	s.HoldLocked(&mu, 10*time.Millisecond, "k", "a", []byte("m"), func(h *Held[string], why string) {
		refused <- h.Key + " " + h.Ask + ": " + why
	})
	mu.Unlock()
	select {
	case got := <-refused:
		if want := "k a: the client opened no stream to receive it within 10ms (a GET on its session)"; got != want {
			t.Fatalf("refused %q, want %q", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the held request did not expire")
	}
	mu.Lock()
	defer mu.Unlock()
	if s.HeldLocked() != 0 {
		t.Fatal("an expired request is still held")
	}
}

func TestServeEndedSession(t *testing.T) {
	var mu sync.Mutex
	var s Streams[int]
	s.CloseLocked()
	w := httptest.NewRecorder()
	s.Serve(w, httptest.NewRequest(http.MethodGet, "/mcp", nil), &mu)
	if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "session not found") {
		t.Fatalf("%d %q", w.Code, w.Body.String())
	}
}
