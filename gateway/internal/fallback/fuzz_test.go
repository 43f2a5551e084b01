package fallback

import (
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// FuzzFallbackArgs: whatever arguments an agent gives a fallback tool,
// parsing never panics, and either accepts them (a task id of at most
// maxTaskIDLen, a wait within [0, 50 s], object answers for task_answer)
// or says what to fix, naming the tool's argument.
func FuzzFallbackArgs(f *testing.F) {
	for _, s := range []string{
		`{"taskId":"t"}`, `{"taskId":"t","waitSeconds":50}`, `{"taskId":"t","waitSeconds":-1}`,
		`{"taskId":"t","inputResponses":{"1":{"action":"accept"}}}`, `{"taskId":"t","inputResponses":{"1":2}}`,
		`{}`, `null`, `[]`, `{"taskId":7}`, `{"taskId":"t","x":1}`, `{"taskId":"t","waitSeconds":1e400}`, `{`,
	} {
		for i := range 4 {
			f.Add([]byte(s), i)
		}
	}
	fb, err := New(Config{Enabled: true}, nil, nil, zerolog.Nop())
	if err != nil {
		f.Fatal(err)
	}
	tools := []string{fb.names.status, fb.names.result, fb.names.cancel, fb.names.answer}
	f.Fuzz(func(t *testing.T, raw []byte, which int) {
		name := tools[(which%4+4)%4]
		a, problem := fb.ParseArgs(name, raw)
		if problem != "" {
			if !strings.ContainsAny(problem, "abcdefghijklmnopqrstuvwxyz") {
				t.Fatalf("problem %q says nothing", problem)
			}
			return
		}
		if a.TaskID == "" || len(a.TaskID) > maxTaskIDLen || a.Wait < 0 || a.Wait > fallbackWaitMax {
			t.Fatalf("accepted %s for %s: %+v", raw, name, a)
		}
		if name == fb.names.answer && len(a.InputResponses) == 0 {
			t.Fatalf("task_answer accepted %s without answers", raw)
		}
		if name != fb.names.answer && a.InputResponses != nil {
			t.Fatalf("%s accepted inputResponses: %s", name, raw)
		}
	})
}
