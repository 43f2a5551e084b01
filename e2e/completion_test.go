package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// TestShellCompletion: the script `taskgate completion bash` prints,
// sourced in a real bash, completes commands and a command's flags by
// asking the binary.
func TestShellCompletion(t *testing.T) {
	t.Parallel()
	if buildErr != nil {
		t.Fatalf("taskgate binary unavailable: %v", buildErr)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash here")
	}
	script, err := exec.Command(taskgateBin, "completion", "bash").Output()
	if err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) []string {
		t.Helper()
		// COMP_WORDS as bash fills it: the binary, then the words, the
		// last one being typed.
		prog := string(script) + `
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
_taskgate_complete
printf '%s\n' "${COMPREPLY[@]}"
`
		out, err := exec.Command(bash, append([]string{"-c", prog, "bash", taskgateBin}, words...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.Fields(string(out))
	}
	if got := strings.Join(complete("he"), " "); got != "healthcheck" {
		t.Errorf("taskgate he<TAB> = %q, want healthcheck", got)
	}
	if got := strings.Join(complete("serve", "--replica"), " "); got != "--replica-id" {
		t.Errorf("taskgate serve --replica<TAB> = %q, want --replica-id", got)
	}
	got := complete("serve", "--upstream-c")
	if strings.Join(got, " ") != "--upstream-ca --upstream-client-cert --upstream-client-key --upstream-command --upstream-cpu-limit" {
		t.Errorf("taskgate serve --upstream-c<TAB> = %q", got)
	}
	if out, err := exec.Command(taskgateBin, "completion", "fish").CombinedOutput(); err == nil || !strings.Contains(string(out), "bash or zsh") {
		t.Errorf("completion fish: %v %s, want an error naming bash and zsh", err, out)
	}
}
