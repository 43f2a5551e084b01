package archcheck

import (
	"errors"
	"fmt"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The rules these tests hold the docs to (docs/ARCHITECTURE.md, "Package
// map", says the same for readers):
//
//   - The drawn map is the fenced block that follows the line
//     mapMarker. Each non-blank line is one package of the module, by its
//     path inside the module, then optionally " ──▶ " and the module's
//     packages it imports (non-test files, as go/build reads them for this
//     platform), separated by commas; text from " (" on is a note. A line
//     with no arrow is a package that imports nothing of the module. A name
//     is a path inside the module, or the last element of one when exactly
//     one package of the module ends in it ("core" for
//     gateway/internal/core).
//   - Every package of the module has exactly one line; every drawn
//     arrow is an import, and every import of a module package is drawn.
//   - The table that follows the drawing has one row per package, the
//     package in the first cell as `path`.
//   - A doc.go has a file index when a line of its package comment starts
//     with a file name (after an optional "- "); then every non-test .go
//     file of its directory except doc.go is named in that comment as a
//     bare name (a path into another package, "internal/x/y.go", names
//     nothing here).

const mapMarker = "<!-- package map: checked by internal/archcheck -->"

// arrow separates a package from its imports in the drawn map.
const arrow = "──▶"

// graph is a module's packages, by path inside the module, each with the
// module packages it imports, sorted.
type graph map[string][]string

// moduleRoot is the directory of go.mod above this package, and the
// module's path.
func moduleRoot(t *testing.T) (dir, module string) {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			for line := range strings.Lines(string(b)) {
				if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
					return dir, strings.TrimSpace(m)
				}
			}
			t.Fatalf("%s/go.mod names no module", dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// modulePackages reads every package of the module under root (skipping
// testdata, hidden and underscore directories, node_modules and nested
// modules, a directory with a go.mod of its own, as the go command does)
// with go/build.
func modulePackages(root, module string) (graph, error) {
	g := graph{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (name == "testdata" || name == "node_modules" ||
			strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, "go.mod")); path != root && err == nil {
			return filepath.SkipDir // another module (deploy/helm/check)
		}
		bp, err := build.ImportDir(path, 0)
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		var deps []string
		for _, imp := range bp.Imports {
			if r, ok := strings.CutPrefix(imp, module+"/"); ok {
				deps = append(deps, r)
			}
		}
		sort.Strings(deps)
		g[rel] = deps
		return nil
	})
	return g, err
}

// mapBlock is the fenced block after mapMarker in a Markdown text.
func mapBlock(md string) (string, error) {
	_, after, ok := strings.Cut(md, mapMarker)
	if !ok {
		return "", fmt.Errorf("no line %q", mapMarker)
	}
	lines := strings.Split(after, "\n")
	i := 1 // lines[0] is the rest of the marker's line
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	if i == len(lines) || !strings.HasPrefix(lines[i], "```") {
		return "", errors.New("the package map's marker is not followed by a fenced block")
	}
	start := i + 1
	for j := start; j < len(lines); j++ {
		if strings.HasPrefix(lines[j], "```") {
			return strings.Join(lines[start:j], "\n"), nil
		}
	}
	return "", errors.New("the package map's fenced block is not closed")
}

// resolve turns a name of the drawn map into a package path, against the
// module's packages.
func resolve(name string, pkgs graph) (string, error) {
	if _, ok := pkgs[name]; ok {
		return name, nil
	}
	var found []string
	for p := range pkgs {
		if p == name || strings.HasSuffix(p, "/"+name) && !strings.Contains(name, "/") {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("%q is no package of the module", name)
	default:
		sort.Strings(found)
		return "", fmt.Errorf("%q is ambiguous (%s): write the path", name, strings.Join(found, ", "))
	}
}

// parseMap reads a drawn map, its names resolved against pkgs.
func parseMap(block string, pkgs graph) (graph, error) {
	drawn := graph{}
	var errs []error
	for n, line := range strings.Split(block, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if note := strings.Index(line, " ("); note >= 0 {
			line = line[:note]
		}
		lhs, rhs, _ := strings.Cut(line, arrow)
		pkg, err := resolve(strings.TrimSpace(lhs), pkgs)
		if err != nil {
			errs = append(errs, fmt.Errorf("map line %d: %w", n+1, err))
			continue
		}
		if _, dup := drawn[pkg]; dup {
			errs = append(errs, fmt.Errorf("map line %d: %s has a second line", n+1, pkg))
			continue
		}
		deps := []string{}
		for name := range strings.SplitSeq(rhs, ",") {
			if name = strings.TrimSpace(name); name == "" {
				continue
			}
			dep, err := resolve(name, pkgs)
			if err != nil {
				errs = append(errs, fmt.Errorf("map line %d (%s): %w", n+1, pkg, err))
				continue
			}
			deps = append(deps, dep)
		}
		sort.Strings(deps)
		drawn[pkg] = deps
	}
	return drawn, errors.Join(errs...)
}

// compareMap lists what the drawn map gets wrong about the module.
func compareMap(drawn, actual graph) []string {
	var problems []string
	for _, pkg := range sortedKeys(actual) {
		deps, ok := drawn[pkg]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s has no line in the map", pkg))
			continue
		}
		for _, d := range deps {
			if !slices.Contains(actual[pkg], d) {
				problems = append(problems, fmt.Sprintf("the map draws %s %s %s, but %s does not import it", pkg, arrow, d, pkg))
			}
		}
		for _, d := range actual[pkg] {
			if !slices.Contains(deps, d) {
				problems = append(problems, fmt.Sprintf("%s imports %s, not drawn in the map", pkg, d))
			}
		}
	}
	for _, pkg := range sortedKeys(drawn) {
		if _, ok := actual[pkg]; !ok {
			problems = append(problems, fmt.Sprintf("the map has a line for %s, which is no package", pkg))
		}
	}
	return problems
}

// tableRow matches a row of the package table: "| `path` | ... |".
var tableRow = regexp.MustCompile("^\\| `([^`]+)` \\|")

// compareTable lists the packages the table after the map lacks, and its
// rows for what is no package or is there twice.
func compareTable(md string, actual graph) []string {
	_, after, _ := strings.Cut(md, mapMarker)
	rows := map[string]int{}
	inTable := false
	for line := range strings.Lines(after) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "|") {
			inTable = true
			if m := tableRow.FindStringSubmatch(line); m != nil {
				rows[m[1]]++
			}
			continue
		}
		if inTable {
			break // the first table after the map ends here
		}
	}
	var problems []string
	for _, pkg := range sortedKeys(actual) {
		if rows[pkg] == 0 {
			problems = append(problems, fmt.Sprintf("%s has no row in the package table", pkg))
		}
	}
	for _, pkg := range sortedKeys(rows) {
		if _, ok := actual[pkg]; !ok {
			problems = append(problems, fmt.Sprintf("the package table has a row for %s, which is no package", pkg))
		} else if rows[pkg] > 1 {
			problems = append(problems, fmt.Sprintf("the package table has %d rows for %s", rows[pkg], pkg))
		}
	}
	return problems
}

// indexLine is a line of a package comment that starts with a file name.
var indexLine = regexp.MustCompile(`^\s*(?:-\s+)?[A-Za-z0-9_]+\.go\b`)

// bareName is a file name not preceded by a path, a word or a dot.
var bareName = regexp.MustCompile(`(?:^|[^/\w.-])([A-Za-z0-9_]+\.go)\b`)

// indexProblems lists the files a package comment with a file index does
// not name; a comment without an index has none.
func indexProblems(comment string, files []string) []string {
	if !hasIndex(comment) {
		return nil
	}
	named := map[string]bool{}
	for _, m := range bareName.FindAllStringSubmatch(comment, -1) {
		named[m[1]] = true
	}
	var problems []string
	for _, f := range files {
		if f != "doc.go" && !named[f] {
			problems = append(problems, fmt.Sprintf("its doc.go index does not name %s", f))
		}
	}
	return problems
}

// hasIndex says whether a package comment has a file index.
func hasIndex(comment string) bool {
	for line := range strings.Lines(comment) {
		if indexLine.MatchString(line) {
			return true
		}
	}
	return false
}

// packageComment is doc.go's package comment, as go/doc would show it.
func packageComment(path string) (string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		return "", err
	}
	if f.Doc == nil {
		return "", nil
	}
	return f.Doc.Text(), nil
}

// sourceFiles are the non-test .go files of a directory, sorted.
func sourceFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			files = append(files, n)
		}
	}
	return files, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func readArchitecture(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPackageMap: docs/ARCHITECTURE.md draws every package of the module
// with exactly the module packages it imports, and its table has a row for
// each.
func TestPackageMap(t *testing.T) {
	root, module := moduleRoot(t)
	actual, err := modulePackages(root, module)
	if err != nil {
		t.Fatal(err)
	}
	if len(actual) < 20 {
		t.Fatalf("found only %d packages under %s: the walk is wrong", len(actual), root)
	}
	md := readArchitecture(t, root)
	block, err := mapBlock(md)
	if err != nil {
		t.Fatal(err)
	}
	drawn, err := parseMap(block, actual)
	if err != nil {
		t.Error(err)
	}
	for _, p := range compareMap(drawn, actual) {
		t.Error(p)
	}
	for _, p := range compareTable(md, actual) {
		t.Error(p)
	}
}

// TestPackageMapCatchesPlantedErrors: each doctored copy of the real map
// (and table) fails with the problem planted, so TestPackageMap can fail.
func TestPackageMapCatchesPlantedErrors(t *testing.T) {
	root, module := moduleRoot(t)
	actual, err := modulePackages(root, module)
	if err != nil {
		t.Fatal(err)
	}
	md := readArchitecture(t, root)
	block, err := mapBlock(md)
	if err != nil {
		t.Fatal(err)
	}
	lineOf := func(pkg string) string {
		for line := range strings.Lines(block) {
			lhs, _, _ := strings.Cut(line, arrow)
			if strings.TrimSpace(lhs) == pkg {
				return strings.TrimRight(line, "\n")
			}
		}
		t.Fatalf("no line for %s in the real map", pkg)
		return ""
	}
	withoutLine := func(pkg string) string {
		return strings.Replace(block, lineOf(pkg)+"\n", "", 1)
	}
	for _, tc := range []struct {
		name, block, want string
	}{
		{"an arrow that is no import", strings.Replace(block, lineOf("gateway"), lineOf("gateway")+", native", 1),
			"the map draws gateway " + arrow + " gateway/internal/native, but gateway does not import it"},
		{"an import not drawn", strings.Replace(block, lineOf("upstream/stdio"),
			"upstream/stdio "+arrow+" upstream, internal/mcpwire", 1),
			"upstream/stdio imports upstream/internal/bridgesession, not drawn in the map"},
		{"a package without a line", withoutLine("gateway/internal/durable"),
			"gateway/internal/durable has no line in the map"},
		{"a line for no package", block + "\ngateway/internal/gone " + arrow + " core\n",
			`map line`},
		{"a second line", block + "\n" + lineOf("auth") + "\n", "auth has a second line"},
		{"an ambiguous name", block + "\ntestupstream\n", `"testupstream" is ambiguous`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			drawn, err := parseMap(tc.block, actual)
			got := compareMap(drawn, actual)
			if err != nil {
				got = append(got, err.Error())
			}
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("problems %q lack %q", got, tc.want)
			}
		})
	}
	t.Run("a package missing from the table", func(t *testing.T) {
		doctored := regexp.MustCompile("(?m)^\\| `upstream/sse` \\|.*\n").ReplaceAllString(md, "")
		if doctored == md {
			t.Fatal("the real table has no upstream/sse row to remove")
		}
		got := compareTable(doctored, actual)
		if !slices.Contains(got, "upstream/sse has no row in the package table") {
			t.Errorf("problems %q", got)
		}
	})
	t.Run("a new package", func(t *testing.T) {
		grown := graph{}
		for k, v := range actual {
			grown[k] = v
		}
		grown["gateway/internal/planted"] = []string{"auth"}
		drawn, err := parseMap(block, grown)
		if err != nil {
			t.Fatal(err)
		}
		got := append(compareMap(drawn, grown), compareTable(md, grown)...)
		for _, want := range []string{
			"gateway/internal/planted has no line in the map",
			"gateway/internal/planted has no row in the package table",
		} {
			if !slices.Contains(got, want) {
				t.Errorf("problems %q lack %q", got, want)
			}
		}
	})
}

// TestDocIndexes: every package whose doc.go has a file index names each
// of its non-test files there.
func TestDocIndexes(t *testing.T) {
	root, module := moduleRoot(t)
	pkgs, err := modulePackages(root, module)
	if err != nil {
		t.Fatal(err)
	}
	indexed := 0
	for _, pkg := range sortedKeys(pkgs) {
		dir := filepath.Join(root, filepath.FromSlash(pkg))
		doc := filepath.Join(dir, "doc.go")
		if _, err := os.Stat(doc); err != nil {
			continue
		}
		comment, err := packageComment(doc)
		if err != nil {
			t.Fatal(err)
		}
		files, err := sourceFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		if hasIndex(comment) {
			indexed++
		}
		for _, p := range indexProblems(comment, files) {
			t.Errorf("%s: %s", pkg, p)
		}
	}
	if indexed < 10 {
		t.Errorf("only %d doc.go files with an index: the walk is wrong", indexed)
	}
}

// TestDocIndexCatchesPlantedErrors: a file left out of an index fails, a
// path into another package does not count as naming a file, and a
// comment without an index asks for none.
func TestDocIndexCatchesPlantedErrors(t *testing.T) {
	files := []string{"doc.go", "a.go", "b.go", "c_unix.go"}
	for _, tc := range []struct {
		name, comment string
		want          []string
	}{
		{"complete", "Package p.\n\n  - a.go: A.\n  - b.go, c_unix.go: B.\n", nil},
		{"a file left out", "Package p.\n\n  - a.go: A.\n  - b.go: B.\n",
			[]string{"its doc.go index does not name c_unix.go"}},
		{"a path names another package's file", "Package p.\n\n  - a.go: A, like internal/q/b.go.\n  - c_unix.go.\n",
			[]string{"its doc.go index does not name b.go"}},
		{"tabbed index", "Package p.\n\n\ta.go    A\n\tb.go    B\n",
			[]string{"its doc.go index does not name c_unix.go"}},
		{"no index", "Package p does things (a.go).\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := indexProblems(tc.comment, files); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
