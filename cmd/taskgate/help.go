package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// helpWidth is the width help text is wrapped to.
const helpWidth = 80

// flagColumn is where a flag's description starts; a longer name puts
// the description on the lines below it.
const flagColumn = 34

// commandHelp is the help template of a command with many flags (serve):
// its flags grouped by category in the order of categories (flags without
// one last, under "Other"), each description wrapped to helpWidth.
// urfave/cli's own template lists a category's flags unwrapped, hundreds
// of characters wide, and its categories alphabetically.
func commandHelp(cmd *cli.Command) string {
	// A template: escape what text/template would read.
	return strings.ReplaceAll(commandHelpText(cmd), "{{", `{{"{{"}}`)
}

// commandHelpText is commandHelp's text as it is printed.
func commandHelpText(cmd *cli.Command) string {
	var b strings.Builder
	usage := cmd.UsageText
	if usage == "" {
		usage = "taskgate " + cmd.Name + " [flags]"
	}
	fmt.Fprintf(&b, "NAME:\n%s\n\nUSAGE:\n%s\n", wrap("taskgate "+cmd.Name+" - "+cmd.Usage, 3, helpWidth), wrap(usage, 3, helpWidth))
	if cmd.Description != "" {
		b.WriteString("\n" + wrap(cmd.Description, 3, helpWidth) + "\n")
	}
	b.WriteString("\nFLAGS:\n")
	byCat := map[string][]cli.Flag{}
	withEnv := false
	for _, f := range cmd.Flags {
		if f.Names()[0] == cli.HelpFlag.Names()[0] {
			continue // last, below
		}
		byCat[flagCategory(f)] = append(byCat[flagCategory(f)], f)
		if df, ok := f.(cli.DocGenerationFlag); ok && len(df.GetEnvVars()) > 0 {
			withEnv = true
		}
	}
	if withEnv {
		b.WriteString(wrap("A flag can also be set with the environment variable TASKGATE_<FLAG>, upper case with - as _ (TASKGATE_UPSTREAM, TASKGATE_REDIS_URL), unless its line says otherwise.", 3, helpWidth) + "\n")
	}
	for _, cat := range append(append([]string{}, categories...), "") {
		flags := byCat[cat]
		if len(flags) == 0 {
			continue
		}
		if cat == "" && len(byCat) > 1 {
			cat = "Other"
		}
		b.WriteString("\n")
		if cat != "" {
			b.WriteString(cat + "\n")
		}
		for _, f := range flags {
			b.WriteString(flagHelp(f, withEnv))
		}
	}
	b.WriteString("\n" + flagHelp(cli.HelpFlag, false))
	return b.String()
}

// flagCategory is f's Category ("" without one).
func flagCategory(f cli.Flag) string {
	if cf, ok := f.(cli.CategorizableFlag); ok {
		return cf.GetCategory()
	}
	return ""
}

// flagHelp is one flag's entry: "--name VALUE", then its description,
// default and, when envRule (the header states TASKGATE_<FLAG>), what
// differs from that rule, wrapped.
func flagHelp(f cli.Flag, envRule bool) string {
	name, desc, _ := strings.Cut(cli.FlagStringer(f), "\t")
	if _, ok := f.(*cli.BoolFlag); ok {
		desc = strings.Replace(desc, " (default: false)", "", 1)
	}
	// The environment variable follows the rule the header states, and a
	// repeatable flag says so in its description.
	if i := strings.LastIndex(desc, " [$"); i >= 0 {
		desc = desc[:i]
	}
	if envRule && f.Names()[0] != cli.HelpFlag.Names()[0] {
		desc += envNote(f)
	}
	name, _, _ = strings.Cut(name, " [ ")
	if strings.HasSuffix(name, " value") {
		name = strings.TrimSuffix(name, "value") + placeholder(f)
	}
	name = "   " + name
	body := wrap(desc, flagColumn, helpWidth)
	if len(name) >= flagColumn-1 {
		return name + "\n" + body + "\n"
	}
	return name + body[len(name):] + "\n"
}

// placeholder names the value of a flag whose usage gives none.
func placeholder(f cli.Flag) string {
	switch f.(type) {
	case *cli.DurationFlag:
		return "DURATION"
	case *cli.IntFlag, *cli.Int64Flag, *cli.Float64Flag, *cli.UintFlag:
		return "N"
	}
	return "VALUE"
}

// wrap breaks text into lines of at most width characters (a longer word
// stands alone), each indented by indent spaces.
func wrap(text string, indent, width int) string {
	pad := strings.Repeat(" ", indent)
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && indent+len(line)+1+len(w) > width {
			lines = append(lines, pad+line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, pad+line)
	}
	return strings.Join(lines, "\n")
}

// didYouMean is the candidate closest to s by edit distance, if it is
// close enough to be a likely typo ("" otherwise).
func didYouMean(s string, candidates []string) string {
	best, bestD := "", max(2, len(s)/3)+1 // a typo or two in a short word, more in a long one
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// flagNames are the names of flags.
func flagNames(flags []cli.Flag) []string {
	var out []string
	for _, f := range flags {
		out = append(out, f.Names()...)
	}
	return out
}

// envNote is what a flag's help says of its environment variable when it
// is not the TASKGATE_<FLAG> the header states: another name, or none.
func envNote(f cli.Flag) string {
	df, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return ""
	}
	vars := df.GetEnvVars()
	switch {
	case len(vars) == 0:
		return " (no environment variable)"
	case vars[0] != env(f.Names()[0])[0]:
		return " (environment: " + vars[0] + ")"
	}
	return ""
}
