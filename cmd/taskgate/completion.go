package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// Shell completion: the app answers --generate-bash-completion with the
// words that fit where the cursor is (commands, or a command's flags after
// a "-"); the scripts below ask it at each TAB, so they never go stale when
// flags change.

// bashCompletion completes taskgate in bash. COMP_WORDS up to the word
// being typed go back to the binary, which lists the candidates.
const bashCompletion = `# taskgate completion for bash: source <(taskgate completion bash)
_taskgate_complete() {
  local cur="${COMP_WORDS[COMP_CWORD]}" words
  if [[ "$cur" == -* ]]; then
    words=$("${COMP_WORDS[0]}" "${COMP_WORDS[@]:1:COMP_CWORD}" --generate-bash-completion 2>/dev/null)
  else
    words=$("${COMP_WORDS[0]}" "${COMP_WORDS[@]:1:COMP_CWORD-1}" --generate-bash-completion 2>/dev/null)
  fi
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o bashdefault -o default -F _taskgate_complete taskgate
`

// zshCompletion runs the bash function through zsh's bashcompinit.
const zshCompletion = `# taskgate completion for zsh: source <(taskgate completion zsh)
autoload -U +X compinit && compinit
autoload -U +X bashcompinit && bashcompinit
` + bashCompletion

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script: source <(taskgate completion bash), or zsh",
		ArgsUsage: "bash|zsh",
		Action: func(c *cli.Context) error {
			scripts := map[string]string{"bash": bashCompletion, "zsh": zshCompletion}
			if c.Args().Len() != 1 || scripts[c.Args().First()] == "" {
				return fmt.Errorf("completion takes one shell: bash or zsh (got %q)", c.Args().Slice())
			}
			_, err := fmt.Fprint(c.App.Writer, scripts[c.Args().First()])
			return err
		},
	}
}
