package mdlinks

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSlug: GitHub's anchors for headings of the kinds the docs use.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"HTTP+SSE servers":                         "httpsse-servers",
		"Tasks as tools: `--fallback-tools`":       "tasks-as-tools---fallback-tools",
		"Long calls (for clients without tasks)":   "long-calls-for-clients-without-tasks",
		"Several endpoints: the `--webhooks` file": "several-endpoints-the---webhooks-file",
		"See [Policy](policy.md) first":            "see-policy-first",
		"snake_case and Ünïcode 2026-07-28":        "snake_case-and-ünïcode-2026-07-28",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestCheckFindsPlantedErrors: each broken link of testdata/broken.md is
// reported, and only those: links in code, web links and good anchors
// (repeated headings' "-1", explicit ids) pass.
func TestCheckFindsPlantedErrors(t *testing.T) {
	got, err := Check(filepath.Join("testdata", "broken.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`testdata/broken.md: link "#http-sse-servers": no heading makes the anchor #http-sse-servers`,
		`testdata/broken.md: link "target.md#missing": no heading makes the anchor #missing`,
		`testdata/broken.md: link "nowhere.md": no such file testdata/nowhere.md`,
		`testdata/broken.md: link "target.md#repeat-2": no heading makes the anchor #repeat-2`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%q\nwant:\n%q", got, want)
	}
	if !Anchors("<a id=\"explicit\"></a>")["explicit"] {
		t.Error("an explicit <a id> is no anchor")
	}
}

// TestRepoDocs: every relative link and anchor of the user documentation
// resolves.
func TestRepoDocs(t *testing.T) {
	files := []string{"../../README.md", "../../SECURITY.md", "../../CONTRIBUTING.md"}
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	links := 0
	for _, f := range append(files, docs...) {
		md, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		links += len(Links(string(md)))
		problems, err := Check(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Error(p)
		}
	}
	// The docs link each other a few hundred times: far fewer found means
	// the link parser broke, and the check above proved nothing.
	if links < 50 {
		t.Errorf("found only %d links in the docs", links)
	}
	t.Logf("%d links in %d files", links, len(files)+len(docs))
}
