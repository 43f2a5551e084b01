package redistest

import "testing"

// TestRestartKeepsData pins what Restart does with the data: the server
// comes back on the same port and data dir, so without persistence (New)
// it is empty, and with AOF (NewWithArgs --appendonly yes) it reloads
// every write it acknowledged before it was killed (SIGKILL, no shutdown
// save), as a crashed production Redis with appendfsync always does.
func TestRestartKeepsData(t *testing.T) {
	for _, tc := range []struct {
		name string
		srv  func(testing.TB) *Server
		want string // GET k after the restart ("": no such key)
	}{
		{"no persistence", New, ""},
		{"aof", func(t testing.TB) *Server {
			return NewWithArgs(t, "--appendonly", "yes", "--appendfsync", "always")
		}, "v"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.srv(t)
			addr := s.Addr
			mustDo(t, s.Addr, "SET", "k", "v")
			s.Restart()
			if s.Addr != addr {
				t.Fatalf("restarted on %s, want %s", s.Addr, addr)
			}
			got, err := do(s.Addr, "GET", "k")
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("GET k after Restart = %q, want %q", got, tc.want)
			}
			// Stop then Start is the same as Restart.
			s.Stop()
			s.Start()
			if got, _ := do(s.Addr, "GET", "k"); got != tc.want {
				t.Errorf("GET k after Stop+Start = %q, want %q", got, tc.want)
			}
		})
	}
}
