package stdio

import (
	"errors"
	"fmt"
	"strings"
)

// SplitCommand splits a command line into its words as a POSIX shell
// would for a simple command, but runs no shell: words are separated by
// blanks; single quotes keep everything up to the next single quote;
// double quotes keep everything but \\ \" \$ \` and backslash-newline,
// which are unescaped; outside quotes a backslash keeps the next character.
// Expansions ($VAR, globs, ~) are not made, and operators (| ; & < > ( ))
// are refused: there is no shell to give them a meaning.
func SplitCommand(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\\':
			if i+1 == len(line) {
				return nil, errors.New("the command ends with a lone backslash")
			}
			i++
			if line[i] != '\n' { // backslash-newline is a line continuation: nothing
				inWord = true
				cur.WriteByte(line[i])
			}
		case c == '\'':
			inWord = true
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("the command has an unclosed single quote")
			}
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
		case c == '"':
			inWord = true
			closed := false
			for i++; i < len(line); i++ {
				d := line[i]
				if d == '"' {
					closed = true
					break
				}
				if d == '\\' && i+1 < len(line) && strings.IndexByte("\\\"$`\n", line[i+1]) >= 0 {
					i++
					if line[i] != '\n' {
						cur.WriteByte(line[i])
					}
					continue
				}
				cur.WriteByte(d)
			}
			if !closed {
				return nil, errors.New("the command has an unclosed double quote")
			}
		case strings.IndexByte("|;&<>()", c) >= 0:
			return nil, fmt.Errorf("the command has the shell operator %q; no shell runs it (quote it, or wrap the command in sh -c '...')", c)
		default:
			inWord = true
			cur.WriteByte(c)
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, errors.New("the command is empty")
	}
	return words, nil
}
