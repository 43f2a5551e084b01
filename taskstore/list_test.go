package taskstore

import (
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestListPagination(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		// 8 tasks; pairs share a millisecond to exercise ties.
		var created []string
		for i := 0; i < 8; i++ {
			created = append(created, mustCreate(t, s, "o").ID)
			if i%2 == 1 {
				e.clock.Advance(time.Millisecond)
			}
		}
		mustCreate(t, s, "someone-else")

		var seen []*Task
		cursor := ""
		for page := 0; ; page++ {
			tasks, next, err := s.List(ctx, "o", cursor, 3)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range tasks {
				seen = append(seen, l.Task)
			}
			if page == 0 {
				// New tasks arrive meanwhile; they sort before the cursor.
				e.clock.Advance(time.Millisecond)
				mustCreate(t, s, "o")
				mustCreate(t, s, "o")
			}
			if next == "" {
				break
			}
			if page > 10 {
				t.Fatal("pagination does not end")
			}
			cursor = next
		}
		if len(seen) != len(created) {
			t.Fatalf("saw %d tasks, want %d", len(seen), len(created))
		}
		ids := map[string]bool{}
		for i, task := range seen {
			if ids[task.ID] {
				t.Errorf("task %s listed twice", task.ID)
			}
			ids[task.ID] = true
			if task.Owner != "o" {
				t.Errorf("foreign task listed")
			}
			if i > 0 {
				p := seen[i-1]
				if task.CreatedAt.After(p.CreatedAt) || (task.CreatedAt.Equal(p.CreatedAt) && task.ID > p.ID) {
					t.Errorf("not newest first at %d", i)
				}
			}
		}
		for _, id := range created {
			if !ids[id] {
				t.Errorf("task %s skipped", id)
			}
		}

		// Everything, default page size.
		all, next, err := s.List(ctx, "o", "", 0)
		if err != nil || len(all) != 10 || next != "" {
			t.Errorf("List all = %d tasks, next %q, %v", len(all), next, err)
		}
	})
}

func TestListBadCursor(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		mustCreate(t, s, "o")
		b64 := base64.RawURLEncoding.EncodeToString
		for _, c := range []string{
			"garbage!", "AAAA", b64([]byte("v2.1.x")), b64([]byte("v1.-1." + uuid.NewString())),
			b64([]byte("v1.01." + uuid.NewString())), b64([]byte("v1.5.not-a-uuid")), b64([]byte("v1.5")),
		} {
			_, _, err := s.List(ctx, "o", c, 10)
			if !errors.Is(err, ErrBadCursor) {
				t.Errorf("cursor %q: err = %v", c, err)
			}
		}
	})
}

func FuzzCursor(f *testing.F) {
	f.Add("")
	f.Add("djEuMTcwMDAwMDAwMDAwMC4xYjRlMjhiYS0yZmExLTQxZDItODgzZi0wYzI5YWFjMjA5YjE")
	f.Add(listCursor{CreatedMS: 0, ID: "00000000-0000-4000-8000-000000000000"}.encode())
	f.Add("v1.5.x")
	f.Add(listCursor{CreatedMS: 7, ID: upstreamMember("up.1")}.encode())
	f.Add("////")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := decodeCursor(s)
		if err != nil {
			if !errors.Is(err, ErrBadCursor) {
				t.Fatalf("decodeCursor(%q) = %v, not ErrBadCursor", s, err)
			}
			return
		}
		if _, up := upstreamMemberID(c.ID); c.CreatedMS < 0 || !validID(c.ID) && !up {
			t.Fatalf("decodeCursor(%q) accepted %+v", s, c)
		}
		c2, err := decodeCursor(c.encode())
		if err != nil || c2 != c {
			t.Fatalf("round trip of %+v: %+v, %v", c, c2, err)
		}
	})
}

// TestListUnlisted: an Unlisted task is the owner's (Get finds it) but not
// in List.
func TestListUnlisted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store(t)
		shown := mustCreate(t, s, "o")
		hidden, err := s.Create(ctx, NewTask{Owner: "o", Tool: "slow", Protocol: Protocol2025, Unlisted: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "o", hidden.ID); err != nil {
			t.Errorf("Get of an unlisted task: %v", err)
		}
		list, _, err := s.List(ctx, "o", "", 10)
		if err != nil || len(list) != 1 || list[0].Task.ID != shown.ID {
			t.Errorf("List = %+v, %v; want only %s", list, err, shown.ID)
		}
	})
}
